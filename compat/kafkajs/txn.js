#!/usr/bin/env node
// kafkajs transactions against a broker; prints one JSON object on stdout, for tests/txn.
//
//   node txn.js '{"bootstrap": "127.0.0.1:9092", "topic": "t", "input": "in", "output": "out",
//                 "group": "g", "count": 10}'
//
// 1. a transactional producer commits `count` records to `topic`, then aborts `count` more;
// 2. a read_committed and a read_uncommitted consumer (each its own group) read `topic` to its end;
// 3. consume-transform-produce: a consumer of `input` (group `group`) copies every record to
//    `output` inside transactions, committing its offsets with sendOffsets, one transaction per batch.
// Prints {"committed": [...values], "uncommitted": [...values], "copied": n}.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

async function readAll(kafka, topic, groupId, readUncommitted, expected, timeoutMs) {
  const consumer = kafka.consumer({ groupId, readUncommitted, maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const values = []
  await new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, timeoutMs)
    consumer.run({
      eachMessage: async ({ message }) => {
        values.push(message.value.toString())
        if (values.length >= expected) { clearTimeout(timer); resolve() }
      },
    }).catch(reject)
  })
  await consumer.disconnect()
  return values
}

async function main() {
  const spec = JSON.parse(process.argv[2])
  const kafka = new Kafka({ clientId: 'samsa-txn-test', brokers: [spec.bootstrap], logLevel: logLevel.NOTHING,
                            retry: { retries: 10, initialRetryTime: 100 } })
  const producer = kafka.producer({ transactionalId: `${spec.topic}-tx`, idempotent: true, maxInFlightRequests: 1,
                                    transactionTimeout: 30000 })
  await producer.connect()
  const ok = await producer.transaction()
  await ok.send({ topic: spec.topic, messages: Array.from({ length: spec.count }, (_, i) => ({ value: `c${i}` })) })
  await ok.commit()
  const no = await producer.transaction()
  await no.send({ topic: spec.topic, messages: Array.from({ length: spec.count }, (_, i) => ({ value: `a${i}` })) })
  await no.abort()
  const marker = await producer.transaction()  // a committed record after the aborted ones
  await marker.send({ topic: spec.topic, messages: [{ value: 'end' }] })
  await marker.commit()

  const committed = await readAll(kafka, spec.topic, `${spec.topic}-rc`, false, spec.count + 1, 15000)
  const uncommitted = await readAll(kafka, spec.topic, `${spec.topic}-ru`, true, 2 * spec.count + 1, 15000)

  // consume-transform-produce
  const input = kafka.producer()
  await input.connect()
  await input.send({ topic: spec.input, messages: Array.from({ length: spec.count }, (_, i) => ({ value: `in${i}` })) })
  await input.disconnect()
  const copier = kafka.producer({ transactionalId: `${spec.input}-copier`, idempotent: true, maxInFlightRequests: 1 })
  await copier.connect()
  const consumer = kafka.consumer({ groupId: spec.group, readUncommitted: false, maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topic: spec.input, fromBeginning: true })
  let copied = 0
  await new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, 20000)
    consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        const txn = await copier.transaction()
        try {
          await txn.send({ topic: spec.output, messages: batch.messages.map(m => ({ value: `out-${m.value}` })) })
          const next = (BigInt(batch.lastOffset()) + 1n).toString()
          await txn.sendOffsets({ consumerGroupId: spec.group,
                                  topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: next }] }] })
          await txn.commit()
        } catch (e) {
          await txn.abort()
          throw e
        }
        copied += batch.messages.length
        if (copied >= spec.count) { clearTimeout(timer); resolve() }
      },
    }).catch(reject)
  })
  await consumer.disconnect()
  await copier.disconnect()
  await producer.disconnect()
  process.stdout.write(JSON.stringify({ committed, uncommitted, copied }) + '\n')
}

main().catch(e => {
  process.stdout.write(JSON.stringify({ error: String(e && e.stack || e) }) + '\n')
  process.exit(1)
})
