// kafkajs side of the compatibility matrix: one scenario per run, facts and records on stdout.
//
// Usage: node compat.js SCENARIO BOOTSTRAP TOPIC [ARGS...]. Output lines are "STEP name", "FACT key=value",
// "SENT partition offset" and "REC tag partition offset timestamp key value headers" in the line format of
// compat_tests/matrix/records.py. Any client error ends the program with the error on stderr and exit code 1.
'use strict'

const fs = require('fs')
const { Kafka, logLevel, CompressionTypes, CompressionCodecs, ConfigResourceTypes } = require('kafkajs')
const SnappyCodec = require('kafkajs-snappy')

CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP, snappy: CompressionTypes.Snappy }

const step = (name) => console.log(`STEP ${name}`)
const fact = (key, value) => console.log(`FACT ${key}=${value}`)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
// maxWaitTimeInMs (Fetch's max wait; kafkajs's default is 5000): a consumer's disconnect() and its answer to
// a rebalance wait behind the Fetch it has parked at the broker, so each would cost up to 5 s of idle time.
const CONSUMER_TIMES = { sessionTimeout: 10000, heartbeatInterval: 1000, maxWaitTimeInMs: 500 }

function client (bootstrap) {
  return new Kafka({
    clientId: 'logway-compat',
    brokers: [bootstrap],
    logLevel: logLevel.ERROR,
    connectionTimeout: 10000,
    requestTimeout: 30000,
    retry: { retries: 5, initialRetryTime: 100 }
  })
}

const unhex = (f) => (f === '-' ? null : Buffer.from(f.slice(1), 'hex'))
const hex = (b) => (b === null || b === undefined ? '-' : '=' + b.toString('hex'))

function parseHeaders (field) {
  const headers = {}
  if (field === '-') return headers
  for (const item of field.split(',')) {
    const colon = item.indexOf(':')
    headers[item.slice(0, colon)] = Buffer.from(item.slice(colon + 1), 'hex')
  }
  return headers
}

function formatHeaders (headers) {
  const parts = []
  for (const [name, value] of Object.entries(headers || {})) {
    for (const v of Array.isArray(value) ? value : [value]) parts.push(`${name}:${v ? v.toString('hex') : ''}`)
  }
  return parts.length ? parts.join(',') : '-'
}

function readSpec (file) {
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).map((line) => {
    const f = line.split(' ')
    const msg = { partition: Number(f[1]), key: unhex(f[2]), value: unhex(f[3]), headers: parseHeaders(f[4]) }
    if (f.length > 5) msg.timestamp = f[5]
    return { codec: f[0], msg }
  })
}

const printRecord = (tag, partition, m) =>
  console.log(`REC ${tag} ${partition} ${m.offset} ${m.timestamp} ${hex(m.key)} ${hex(m.value)} ${formatHeaders(m.headers)}`)

async function createTopic (kafka, topic, numPartitions, configEntries = []) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions, replicationFactor: 1, configEntries }], waitForLeaders: true })
  } finally {
    await admin.disconnect()
  }
}

// Produce the spec in order: one send() per run of equal codecs; per-record offsets follow from each
// partition's baseOffset because a send() writes one batch per partition in message order.
async function produceSpec (kafka, topic, specs, producerOptions = {}) {
  const producer = kafka.producer({ allowAutoTopicCreation: false, ...producerOptions })
  await producer.connect()
  try {
    let i = 0
    while (i < specs.length) {
      const codec = specs[i].codec
      const run = []
      while (i < specs.length && specs[i].codec === codec) run.push(specs[i++].msg)
      step(`produce ${codec}`)
      const meta = await producer.send({ topic, acks: -1, compression: CODECS[codec], messages: run })
      const base = {}
      for (const m of meta) base[m.partition] = BigInt(m.baseOffset)
      const seen = {}
      for (const m of run) {
        const n = seen[m.partition] || 0n
        seen[m.partition] = n + 1n
        console.log(`SENT ${m.partition} ${base[m.partition] + n}`)
      }
    }
  } finally {
    await producer.disconnect()
  }
}

// A consumer whose run() loop crashed (e.g. no group coordinator) fails the scenario at once with its error.
function watchCrash (consumer) {
  const state = { error: null }
  consumer.on(consumer.events.CRASH, (e) => { state.error = e.payload.error })
  state.check = () => { if (state.error) throw state.error }
  return state
}

// kafkajs consumers always join a group; read with a fresh group from the beginning until `expected` records.
async function consumeAll (kafka, topic, expected, tag = 'all', groupId = `reader-${topic}-${Date.now()}`) {
  const consumer = kafka.consumer({ groupId, ...CONSUMER_TIMES })
  const records = []
  const crash = watchCrash(consumer)
  await consumer.connect()
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({ autoCommit: false, eachMessage: async ({ partition, message }) => { records.push([partition, message]) } })
    const deadline = Date.now() + 30000
    while (records.length < expected && Date.now() < deadline) {
      crash.check()
      await sleep(50)
    }
    await sleep(500)
  } finally {
    await consumer.disconnect()
  }
  for (const [p, m] of records) printRecord(tag, p, m)
  return records
}

async function admin (bootstrap, topic) {
  const kafka = client(bootstrap)
  const admin = kafka.admin()
  await admin.connect()
  try {
    step('createTopics')
    await admin.createTopics({
      topics: [{ topic, numPartitions: 3, replicationFactor: 1, configEntries: [{ name: 'retention.ms', value: '3600000' }, { name: 'cleanup.policy', value: 'compact' }] }],
      waitForLeaders: true
    })
    step('listTopics')
    fact('listed', (await admin.listTopics()).includes(topic))
    step('fetchTopicMetadata')
    const md = await admin.fetchTopicMetadata({ topics: [topic] })
    fact('partitions', md.topics[0].partitions.length)
    fact('leaders', md.topics[0].partitions.every((p) => p.leader >= 0))
    step('describeConfigs')
    const cfg = await admin.describeConfigs({ resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }], includeSynonyms: false })
    const entries = Object.fromEntries(cfg.resources[0].configEntries.map((e) => [e.configName, e.configValue]))
    fact('config.retention.ms', entries['retention.ms'])
    fact('config.cleanup.policy', entries['cleanup.policy'])
    step('describeCluster')
    const cluster = await admin.describeCluster()
    fact('cluster.nodes', cluster.brokers.length)
    fact('cluster.id.present', Boolean(cluster.clusterId))
    step('createPartitions')
    await admin.createPartitions({ topicPartitions: [{ topic, count: 5 }] })
    const md2 = await admin.fetchTopicMetadata({ topics: [topic] })
    fact('partitions.after', md2.topics[0].partitions.length)
    step('deleteTopics')
    await admin.deleteTopics({ topics: [topic] })
    let gone = false
    const deadline = Date.now() + 15000
    while (!gone && Date.now() < deadline) {
      gone = !(await admin.listTopics()).includes(topic)
      if (!gone) await sleep(100)
    }
    fact('deleted', gone)
  } finally {
    await admin.disconnect()
  }
}

async function roundtrip (bootstrap, topic, partitions, specFile, idempotent) {
  const kafka = client(bootstrap)
  const specs = readSpec(specFile)
  step('createTopics')
  await createTopic(kafka, topic, Number(partitions))
  const options = idempotent === 'idempotent' ? { idempotent: true, maxInFlightRequests: 1 } : {}
  await produceSpec(kafka, topic, specs, options)
  step('consume')
  await consumeAll(kafka, topic, specs.length)
}

async function group (bootstrap, topic, groupId, firstFile, secondFile) {
  const kafka = client(bootstrap)
  const first = readSpec(firstFile)
  const second = readSpec(secondFile)
  step('createTopics')
  await createTopic(kafka, topic, 4)
  const member = async (name) => {
    const consumer = kafka.consumer({ groupId, ...CONSUMER_TIMES, rebalanceTimeout: 10000 })
    const state = { name, consumer, records: [], assigned: 0, next: {}, crash: watchCrash(consumer) }
    consumer.on(consumer.events.GROUP_JOIN, (e) => {
      state.assigned = (e.payload.memberAssignment[topic] || []).length
    })
    await consumer.connect()
    await consumer.subscribe({ topics: [topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        state.records.push([partition, message])
        state.next[partition] = (BigInt(message.offset) + 1n).toString()
      }
    })
    return state
  }
  step('join two members')
  const a = await member('a')
  const b = await member('b')
  let deadline = Date.now() + 30000
  while (!(a.assigned > 0 && b.assigned > 0 && a.assigned + b.assigned === 4) && Date.now() < deadline) {
    a.crash.check()
    b.crash.check()
    await sleep(50)
  }
  fact('assigned.a', a.assigned)
  fact('assigned.b', b.assigned)
  step('produce first')
  await produceSpec(kafka, topic, first)
  step('consume first')
  deadline = Date.now() + 30000
  while (a.records.length + b.records.length < first.length && Date.now() < deadline) {
    a.crash.check()
    b.crash.check()
    await sleep(50)
  }
  await sleep(300)
  for (const m of [a, b]) {
    step(`commit ${m.name}`)
    const offsets = Object.entries(m.next).map(([partition, offset]) => ({ topic, partition: Number(partition), offset }))
    if (offsets.length) await m.consumer.commitOffsets(offsets)
    await m.consumer.disconnect()
    for (const [p, msg] of m.records) printRecord(m.name, p, msg)
  }
  step('committed offsets')
  const adm = kafka.admin()
  await adm.connect()
  try {
    const committed = await adm.fetchOffsets({ groupId, topics: [topic] })
    for (const p of committed[0].partitions) fact(`committed.${p.partition}`, p.offset)
  } finally {
    await adm.disconnect()
  }
  step('produce second')
  await produceSpec(kafka, topic, second)
  step('resume')
  const c = await member('c')
  deadline = Date.now() + 45000
  while (c.records.length < second.length && Date.now() < deadline) {
    c.crash.check()
    await sleep(50)
  }
  await sleep(300)
  await c.consumer.disconnect()
  for (const [p, msg] of c.records) printRecord('c', p, msg)
}

async function offsets (bootstrap, topic, baseTs, count) {
  const kafka = client(bootstrap)
  step('createTopics')
  await createTopic(kafka, topic, 2)
  step('produce')
  const producer = kafka.producer()
  await producer.connect()
  const messages = []
  for (let i = 0; i < Number(count); i++) {
    messages.push({ partition: 0, key: null, value: Buffer.from(`v${i}`), timestamp: String(Number(baseTs) + i * 1000) })
  }
  await producer.send({ topic, acks: -1, messages })
  await producer.disconnect()
  const admin = kafka.admin()
  await admin.connect()
  try {
    step('fetchTopicOffsets')
    for (const p of await admin.fetchTopicOffsets(topic)) fact(`offsets.${p.partition}`, `${p.low}..${p.high}`)
    step('fetchTopicOffsetsByTimestamp')
    const byTime = await admin.fetchTopicOffsetsByTimestamp(topic, Number(baseTs) + 4500)
    fact('time.offset', byTime.find((p) => p.partition === 0).offset)
    const future = await admin.fetchTopicOffsetsByTimestamp(topic, Number(baseTs) + 1000000)
    fact('future.offset', future.find((p) => p.partition === 0).offset)
  } finally {
    await admin.disconnect()
  }
  step('consume')
  await consumeAll(kafka, topic, Number(count), 'scan')
}

async function main () {
  const [scenario, bootstrap, topic, ...args] = process.argv.slice(2)
  const scenarios = { admin, roundtrip, group, offsets }
  if (!scenarios[scenario]) throw new Error(`unknown scenario ${scenario}`)
  await scenarios[scenario](bootstrap, topic, ...args)
}

// Exit only once stdout has drained: a pipe write is asynchronous, and process.exit() would cut the records off.
main().then(() => process.stdout.write('', () => process.exit(0)), (err) => {
  console.error(err && err.stack ? err.stack : err)
  if (err && err.cause) console.error('Caused by: ' + (err.cause.stack || err.cause))
  process.stdout.write('', () => process.exit(1))
})
