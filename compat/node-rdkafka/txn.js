#!/usr/bin/env node
// node-rdkafka transactions against a broker; prints one JSON object on stdout, for tests/txn.
//
//   node txn.js '{"bootstrap": "127.0.0.1:9092", "topic": "t", "input": "in", "output": "out",
//                 "group": "g", "count": 10}'
//
// 1. a transactional producer commits `count` records to `topic`, aborts `count` more, commits "end";
// 2. read_committed and read_uncommitted consumers read `topic` to its end;
// 3. consume-transform-produce: records of `input` are copied to `output` in one transaction that
//    also commits the consumer group's offsets (sendOffsetsToTransaction).
// Prints {"committed": [...], "uncommitted": [...], "copied": n}.
'use strict'

const Kafka = require('node-rdkafka')

const p = (fn) => new Promise((resolve, reject) => fn((err, v) => (err ? reject(err) : resolve(v))))

function producer(spec, tid) {
  const prod = new Kafka.Producer({ 'metadata.broker.list': spec.bootstrap, 'transactional.id': tid,
                                    dr_cb: false, 'linger.ms': 5 })
  return p(cb => prod.connect({}, cb)).then(() => prod)
}

async function readAll(spec, topic, isolation, expected) {
  const c = new Kafka.KafkaConsumer({ 'metadata.broker.list': spec.bootstrap, 'group.id': `${topic}-${isolation}`,
                                      'isolation.level': isolation, 'enable.auto.commit': false },
                                    { 'auto.offset.reset': 'earliest' })
  await p(cb => c.connect({}, cb))
  c.assign([{ topic, partition: 0, offset: 0 }])
  const values = []
  const deadline = Date.now() + 15000
  while (Date.now() < deadline) {
    const msgs = await p(cb => c.consume(100, cb))
    for (const m of msgs) values.push(m.value.toString())
    if (values.length >= expected && msgs.length === 0) break
  }
  await p(cb => c.disconnect(cb))
  return values
}

async function main() {
  const spec = JSON.parse(process.argv[2])
  const prod = await producer(spec, `${spec.topic}-nrd`)
  await p(cb => prod.initTransactions(20000, cb))
  await p(cb => prod.beginTransaction(cb))
  for (let i = 0; i < spec.count; i++) prod.produce(spec.topic, 0, Buffer.from(`c${i}`))
  await p(cb => prod.commitTransaction(20000, cb))
  await p(cb => prod.beginTransaction(cb))
  for (let i = 0; i < spec.count; i++) prod.produce(spec.topic, 0, Buffer.from(`a${i}`))
  await p(cb => prod.flush(10000, cb))
  await p(cb => prod.abortTransaction(20000, cb))
  await p(cb => prod.beginTransaction(cb))
  prod.produce(spec.topic, 0, Buffer.from('end'))
  await p(cb => prod.commitTransaction(20000, cb))

  const committed = await readAll(spec, spec.topic, 'read_committed', spec.count + 1)
  const uncommitted = await readAll(spec, spec.topic, 'read_uncommitted', 2 * spec.count + 1)

  // consume-transform-produce
  const plain = new Kafka.Producer({ 'metadata.broker.list': spec.bootstrap, dr_cb: false })
  await p(cb => plain.connect({}, cb))
  for (let i = 0; i < spec.count; i++) plain.produce(spec.input, 0, Buffer.from(`in${i}`))
  await p(cb => plain.flush(10000, cb))
  await p(cb => plain.disconnect(cb))
  const consumer = new Kafka.KafkaConsumer({ 'metadata.broker.list': spec.bootstrap, 'group.id': spec.group,
                                             'enable.auto.commit': false, 'isolation.level': 'read_committed' },
                                           { 'auto.offset.reset': 'earliest' })
  await p(cb => consumer.connect({}, cb))
  consumer.assign([{ topic: spec.input, partition: 0, offset: 0 }])
  const got = []
  const deadline = Date.now() + 15000
  while (got.length < spec.count && Date.now() < deadline) {
    for (const m of await p(cb => consumer.consume(100, cb))) got.push(m)
  }
  await p(cb => prod.beginTransaction(cb))
  for (const m of got) prod.produce(spec.output, 0, Buffer.from(`out-${m.value}`))
  const last = got[got.length - 1]
  await p(cb => prod.sendOffsetsToTransaction([{ topic: spec.input, partition: 0, offset: last.offset + 1 }],
                                              consumer, 20000, cb))
  await p(cb => prod.commitTransaction(20000, cb))
  await p(cb => consumer.disconnect(cb))
  await p(cb => prod.disconnect(cb))
  process.stdout.write(JSON.stringify({ committed, uncommitted, copied: got.length }) + '\n')
}

main().then(() => process.exit(0)).catch(e => {
  process.stdout.write(JSON.stringify({ error: String(e && (e.stack || e.message) || e) }) + '\n')
  process.exit(1)
})
