#!/usr/bin/env node
// Runs kafkajs against a broker and prints one JSON object on stdout, for tests/compat.
//
//   node runner.js '{"bootstrap": "127.0.0.1:9092", "topic": "t1", "codec": "zstd",
//                    "count": 20, "baseTs": 1700000000000, "queryTimestamps": [...]}'
//
// Steps: create the topic with the admin client, produce `count` records in two sends with the
// codec, read the partition back from offset 0, then list offsets (earliest, latest and by
// each timestamp in queryTimestamps). Errors are reported as {"error": "..."} with exit code 1.
//
// Reading: kafkajs's Consumer only works inside a consumer group, and Samsa has no group
// coordinator yet, so the partition is read with kafkajs's broker-level Fetch, the same request
// encoder and record-batch decoder (and codecs) its Consumer uses, with no group and no commits.
//
// Codecs: kafkajs ships none and gzip. Snappy is kafkajs-snappy (pure JS); LZ4 and ZSTD are
// registered here from pure-JS/WASM libraries (lz4js, @bokuweb/zstd-wasm), so nothing native
// is compiled at install time.
'use strict'

const { Kafka, CompressionTypes, CompressionCodecs, logLevel } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')
const lz4js = require('lz4js')
const zstd = require('@bokuweb/zstd-wasm')

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = () => ({
  async compress(encoder) {
    return Buffer.from(lz4js.compress(encoder.buffer))
  },
  async decompress(buffer) {
    return Buffer.from(lz4js.decompress(buffer))
  },
})
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress(encoder) {
    return Buffer.from(zstd.compress(encoder.buffer, 3))
  },
  async decompress(buffer) {
    return Buffer.from(zstd.decompress(buffer))
  },
})

const CODECS = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

// The Kafka object keeps its cluster factory under a private symbol; a Cluster gives access
// to a Broker connection and its `fetch` request without joining a consumer group.
function createCluster(kafka) {
  const sym = Object.getOwnPropertySymbols(kafka).find(
    s => s.description === 'private:Kafka:createCluster'
  )
  if (!sym) throw new Error('kafkajs internals changed: no createCluster symbol')
  return kafka[sym]({ allowAutoTopicCreation: false, isolationLevel: 0 })
}

async function readPartition(kafka, topic, partition, endOffset) {
  const cluster = createCluster(kafka)
  await cluster.connect()
  try {
    await cluster.addTargetTopic(topic)
    const leaders = cluster.findLeaderForPartitions(topic, [partition])
    const nodeId = Object.keys(leaders)[0]
    const broker = await cluster.findBroker({ nodeId })
    const records = []
    let offset = 0n
    let fetches = 0
    while (offset < BigInt(endOffset)) {
      if (++fetches > 1000) throw new Error(`read stuck at offset ${offset}`)
      const { responses } = await broker.fetch({
        replicaId: -1,
        isolationLevel: 0,
        maxWaitTime: 500,
        minBytes: 1,
        maxBytes: 1048576,
        topics: [{ topic, partitions: [{ partition, fetchOffset: offset.toString(), maxBytes: 65536 }] }],
      })
      const p = responses[0].partitions[0]
      if (p.errorCode !== 0) throw new Error(`fetch error code ${p.errorCode}`)
      for (const m of p.messages) {
        if (m.isControlRecord) continue
        if (BigInt(m.offset) < offset) continue // a batch can start before the fetch offset
        records.push({
          offset: Number(m.offset),
          timestamp: Number(m.timestamp),
          key: m.key === null ? null : m.key.toString(),
          value: m.value === null ? null : m.value.toString(),
          headers: Object.fromEntries(
            Object.entries(m.headers || {}).map(([k, v]) => [k, v.toString()])
          ),
        })
        offset = BigInt(m.offset) + 1n
      }
    }
    return { records, fetches }
  } finally {
    await cluster.disconnect()
  }
}

async function roundtrip(spec) {
  const codec = CODECS[spec.codec]
  if (codec === undefined) throw new Error(`unknown codec ${spec.codec}`)
  if (spec.codec === 'zstd') await zstd.init()
  const kafka = new Kafka({
    clientId: 'samsa-compat-kafkajs',
    brokers: [spec.bootstrap],
    logLevel: logLevel.NOTHING,
    retry: { retries: 3, initialRetryTime: 100 },
    // optional security: {"sasl": {"mechanism": "plain", "username": ..., "password": ...},
    // "ssl": {"ca": "<path to a PEM CA file>"}}
    ...(spec.sasl ? { sasl: spec.sasl } : {}),
    ...(spec.ssl ? { ssl: { ca: [require('fs').readFileSync(spec.ssl.ca, 'utf-8')] } } : {}),
  })
  const out = { codec: spec.codec }
  const admin = kafka.admin()
  await admin.connect()
  try {
    out.created = await admin.createTopics({
      topics: [{ topic: spec.topic, numPartitions: 1, replicationFactor: 1 }],
      waitForLeaders: true,
    })
    const md = await admin.fetchTopicMetadata({ topics: [spec.topic] })
    out.partitions = md.topics[0].partitions.map(p => p.partitionId)

    const producer = kafka.producer({ allowAutoTopicCreation: false })
    await producer.connect()
    out.produced = []
    const half = Math.ceil(spec.count / 2)
    for (const [lo, hi] of [[0, half], [half, spec.count]]) {
      const messages = []
      for (let i = lo; i < hi; i++) {
        messages.push({
          key: `k${i}`,
          value: `${spec.codec}-value-${i}-` + 'x'.repeat(40),
          timestamp: String(spec.baseTs + i * 10),
          headers: { h: `v${i}` },
          partition: 0,
        })
      }
      const meta = await producer.send({ topic: spec.topic, acks: -1, compression: codec, messages })
      out.produced.push(...meta.map(m => ({ partition: m.partition, baseOffset: Number(m.baseOffset) })))
    }
    await producer.disconnect()

    const offs = await admin.fetchTopicOffsets(spec.topic)
    out.offsets = { earliest: Number(offs[0].low), latest: Number(offs[0].high) }
    out.byTimestamp = {}
    for (const ts of spec.queryTimestamps || []) {
      const r = await admin.fetchTopicOffsetsByTimestamp(spec.topic, ts)
      out.byTimestamp[String(ts)] = Number(r[0].offset)
    }
    const read = await readPartition(kafka, spec.topic, 0, out.offsets.latest)
    out.records = read.records
    out.fetches = read.fetches
  } finally {
    await admin.disconnect()
  }
  return out
}

async function main() {
  const spec = JSON.parse(process.argv[2])
  const result = await roundtrip(spec)
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().catch(err => {
  process.stdout.write(JSON.stringify({ error: `${err.name}: ${err.message}` }) + '\n')
  process.exit(1)
})
