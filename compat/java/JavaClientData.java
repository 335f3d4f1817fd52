// Scenarios of SamsaJavaClient (see there) for plain data: an idempotent producer with a
// compression codec, a consumer reading it back, offsets looked up by time, and two consumers
// sharing a group through rebalances (classic protocol with the cooperative sticky assignor, or
// KIP-848's consumer protocol).
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

final class JavaClientData {

    /** Produces spec "records" ([{"key", "value", "timestamp", "headers": {name: value}}]) to
     *  partition 0 of a new topic with an idempotent producer (acks=all, the 4.x default) and
     *  compression "codec", in two sends of half each; reads them back by assignment; looks up
     *  "queryTimestamps" with the consumer (offsetsForTimes) and the admin (listOffsets
     *  forTimestamp), and earliest / latest / max-timestamp offsets both ways. */
    static Map<String, Object> produceConsume(Map<String, Object> spec) throws Exception {
        String bootstrap = SamsaJavaClient.str(spec, "bootstrap"), topic = SamsaJavaClient.str(spec, "topic");
        List<?> records = SamsaJavaClient.list(spec, "records");
        TopicPartition tp = new TopicPartition(topic, 0);
        Map<String, Object> out = new LinkedHashMap<>();
        try (Admin admin = SamsaJavaClient.admin(bootstrap)) {
            SamsaJavaClient.createTopic(admin, topic, 1);
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            pp.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, SamsaJavaClient.str(spec, "codec"));
            pp.put(ProducerConfig.LINGER_MS_CONFIG, "50");  // (each half in one batch)
            try (KafkaProducer<String, String> p = new KafkaProducer<>(pp, new StringSerializer(),
                    new StringSerializer())) {
                List<Object> produced = new ArrayList<>();
                int half = records.size() / 2;
                for (List<?> part : List.of(records.subList(0, half), records.subList(half, records.size()))) {
                    List<java.util.concurrent.Future<RecordMetadata>> acks = new ArrayList<>();
                    for (Object o : part) {
                        Map<String, Object> r = SamsaJavaClient.Json.object(o);
                        RecordHeaders headers = new RecordHeaders();
                        SamsaJavaClient.Json.object(r.get("headers")).forEach(
                                (k, v) -> headers.add(k, String.valueOf(v).getBytes(StandardCharsets.UTF_8)));
                        acks.add(p.send(new ProducerRecord<>(topic, 0, ((Number) r.get("timestamp")).longValue(),
                                (String) r.get("key"), (String) r.get("value"), headers)));
                    }
                    p.flush();
                    for (java.util.concurrent.Future<RecordMetadata> f : acks) produced.add(f.get().offset());
                }
                out.put("producedOffsets", produced);
                // the id the producer was given (InitProducerId: it is idempotent), and what the
                // partition leader knows of it (DescribeProducers: its last sequence number)
                out.put("clientProducerId", SamsaJavaClient.clientProducerIdAndEpoch(p)[0]);
            }
            List<Object> producers = new ArrayList<>();
            for (ProducerState ps : admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()) {
                producers.add(Map.of("producerId", ps.producerId(), "producerEpoch", ps.producerEpoch(),
                        "lastSequence", ps.lastSequence()));
            }
            out.put("producers", producers);
            Properties cp = SamsaJavaClient.consumerProps(bootstrap, "read_uncommitted");
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp, new StringDeserializer(),
                    new StringDeserializer())) {
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                List<Object> read = new ArrayList<>();
                long deadline = System.currentTimeMillis() + 60_000;
                while (read.size() < records.size()) {
                    if (System.currentTimeMillis() > deadline) throw new IllegalStateException("read " + read.size());
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                        Map<String, Object> m = new LinkedHashMap<>();
                        m.put("offset", r.offset());
                        m.put("key", r.key());
                        m.put("value", r.value());
                        m.put("timestamp", r.timestamp());
                        m.put("timestampType", r.timestampType().toString());
                        Map<String, Object> hs = new LinkedHashMap<>();
                        for (Header h : r.headers()) hs.put(h.key(), new String(h.value(), StandardCharsets.UTF_8));
                        m.put("headers", hs);
                        read.add(m);
                    }
                }
                out.put("records", read);
                out.put("beginningOffsets", c.beginningOffsets(List.of(tp)).get(tp));
                out.put("endOffsets", c.endOffsets(List.of(tp)).get(tp));
                Map<String, Object> byTime = new LinkedHashMap<>();
                for (Object q : SamsaJavaClient.list(spec, "queryTimestamps")) {
                    long ts = ((Number) q).longValue();
                    OffsetAndTimestamp found = c.offsetsForTimes(Map.of(tp, ts)).get(tp);
                    byTime.put(String.valueOf(ts), found == null ? null : List.of(found.offset(), found.timestamp()));
                }
                out.put("offsetsForTimes", byTime);
            }
            Map<String, Object> adminOffsets = new LinkedHashMap<>();
            adminOffsets.put("earliest", listOffset(admin, tp, OffsetSpec.earliest()));
            adminOffsets.put("latest", listOffset(admin, tp, OffsetSpec.latest()));
            adminOffsets.put("maxTimestamp", listOffset(admin, tp, OffsetSpec.maxTimestamp()));
            Map<String, Object> byTime = new LinkedHashMap<>();
            for (Object q : SamsaJavaClient.list(spec, "queryTimestamps")) {
                long ts = ((Number) q).longValue();
                byTime.put(String.valueOf(ts), listOffset(admin, tp, OffsetSpec.forTimestamp(ts)));
            }
            adminOffsets.put("forTimestamp", byTime);
            out.put("adminListOffsets", adminOffsets);
        }
        return out;
    }

    /** One record to partition 0 of "topic" by a producer giving up after "timeoutMs"
     *  (request and delivery timeouts): {"send": its offset, or {"error": exception class}}. */
    static Map<String, Object> produceOne(Map<String, Object> spec) throws Exception {
        int timeoutMs = SamsaJavaClient.num(spec, "timeoutMs", 30_000);
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, SamsaJavaClient.str(spec, "bootstrap"));
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(timeoutMs / 2));
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, String.valueOf(timeoutMs));
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, String.valueOf(timeoutMs));
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
            out.put("send", JavaClientAdmin.attempt(() -> p.send(
                    new ProducerRecord<>(SamsaJavaClient.str(spec, "topic"), 0, "k", "v")).get().offset()));
        }
        return out;
    }

    /** [offset, timestamp] as Admin.listOffsets answers (offset -1 and timestamp -1 when no
     *  record matches). */
    static List<Object> listOffset(Admin admin, TopicPartition tp, OffsetSpec spec) throws Exception {
        ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get();
        return List.of(info.offset(), info.timestamp());
    }

    // -- two consumers in one group -----------------------------------------------------------

    /** One group member, polled by its own thread (a KafkaConsumer is single-threaded): it
     *  records every rebalance callback, every record it gets, and commits synchronously after
     *  each poll and in onPartitionsRevoked (so a partition changes hands at its committed
     *  position: nothing lost, nothing read twice). */
    static final class Member implements Runnable, ConsumerRebalanceListener {
        final String name;
        final KafkaConsumer<String, String> consumer;
        final List<Object> events;  // shared, synchronized on itself
        final List<Object> consumed;  // shared, synchronized on itself
        final AtomicBoolean stop = new AtomicBoolean();
        final Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();
        volatile java.util.Set<String> owned = new TreeSet<>();
        volatile Throwable failure;
        Thread thread;

        Member(String name, Properties props, List<Object> events, List<Object> consumed) {
            this.name = name;
            this.consumer = new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
            this.events = events;
            this.consumed = consumed;
        }

        void start(String topic) {
            thread = new Thread(() -> {
                consumer.subscribe(List.of(topic), this);
                run();
            }, name);
            thread.start();
        }

        @Override
        public void run() {
            try {
                while (!stop.get()) {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(100));
                    owned = names(consumer.assignment());  // (before its records are counted as read)
                    for (ConsumerRecord<String, String> r : records) {
                        Map<String, Object> m = new LinkedHashMap<>();
                        m.put("member", name);
                        m.put("partition", r.partition());
                        m.put("offset", r.offset());
                        m.put("value", r.value());
                        synchronized (consumed) {
                            consumed.add(m);
                        }
                        pending.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    commit(null);
                }
            } catch (Throwable e) {
                failure = e;
            } finally {
                try {
                    consumer.close(); // (leaves the group: onPartitionsRevoked first)
                } catch (Throwable e) {
                    if (failure == null) failure = e;
                }
                owned = new TreeSet<>();
            }
        }

        void commit(Collection<TopicPartition> only) {
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            pending.forEach((tp, om) -> {
                if (only == null || only.contains(tp)) offsets.put(tp, om);
            });
            if (offsets.isEmpty()) return;
            consumer.commitSync(offsets);
            offsets.keySet().forEach(pending::remove);
        }

        void event(String kind, Collection<TopicPartition> partitions) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("member", name);
            m.put("kind", kind);
            m.put("partitions", new ArrayList<>(names(partitions)));
            synchronized (events) {
                events.add(m);
            }
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            commit(partitions);  // (before they go: the next owner starts where this one stopped)
            event("revoked", partitions);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            event("assigned", partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            event("lost", partitions);
        }

        void stopAndJoin() throws InterruptedException {
            stop.set(true);  // (its poll returns within 100 ms)
            thread.join(60_000);
            if (thread.isAlive()) throw new IllegalStateException(name + " did not stop");
        }
    }

    static java.util.Set<String> names(Collection<TopicPartition> tps) {
        java.util.Set<String> out = new TreeSet<>();
        for (TopicPartition tp : tps) out.add(tp.toString());
        return out;
    }

    /** Member "a" joins alone and reads phase 1; "b" joins (a rebalance: some of a's partitions
     *  move to b) and both read phase 2; b leaves (close: its partitions go back to a) and a
     *  reads phase 3. Returns the callbacks in order, each member's partitions after each
     *  phase, and every record each member got. */
    static Map<String, Object> groupRebalance(Map<String, Object> spec) throws Exception {
        String bootstrap = SamsaJavaClient.str(spec, "bootstrap"), topic = SamsaJavaClient.str(spec, "topic");
        String group = SamsaJavaClient.str(spec, "group");
        int partitions = SamsaJavaClient.num(spec, "partitions", 4), perPhase = SamsaJavaClient.num(spec, "perPhase", 40);
        long timeoutMs = SamsaJavaClient.num(spec, "timeoutMs", 90_000);
        Map<String, Object> out = new LinkedHashMap<>();
        List<Object> events = new ArrayList<>(), consumed = new ArrayList<>();
        try (Admin admin = SamsaJavaClient.admin(bootstrap)) {
            SamsaJavaClient.createTopic(admin, topic, partitions);
            Properties cp = SamsaJavaClient.consumerProps(bootstrap, "read_uncommitted");
            cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            String protocol = SamsaJavaClient.str(spec, "groupProtocol", "classic");
            cp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
            if (protocol.equals("classic")) {
                cp.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                        SamsaJavaClient.str(spec, "assignor",
                                "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"));
            } else if (spec.get("remoteAssignor") != null) {
                cp.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, SamsaJavaClient.str(spec, "remoteAssignor"));
            }
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            List<Object> phases = new ArrayList<>();
            try (KafkaProducer<String, String> p = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
                Member a = new Member("a", cp, events, consumed);
                a.start(topic);
                Member b = null;
                try {
                    produce(p, topic, partitions, "p1", perPhase);
                    awaitConsumed(consumed, perPhase, timeoutMs, a);
                    phases.add(phase("alone", a, null));
                    b = new Member("b", cp, events, consumed);
                    b.start(topic);
                    Member bb = b;
                    await(() -> !a.owned.isEmpty() && !bb.owned.isEmpty()
                            && a.owned.size() + bb.owned.size() == partitions
                            && disjoint(a.owned, bb.owned), timeoutMs, "both members own partitions", a, b);
                    produce(p, topic, partitions, "p2", perPhase);
                    awaitConsumed(consumed, 2 * perPhase, timeoutMs, a, b);
                    phases.add(phase("shared", a, b));
                    b.stopAndJoin();
                    if (b.failure != null) throw new IllegalStateException("member b failed", b.failure);
                    await(() -> a.owned.size() == partitions, timeoutMs, "a owns every partition again", a);
                    produce(p, topic, partitions, "p3", perPhase);
                    awaitConsumed(consumed, 3 * perPhase, timeoutMs, a);
                    phases.add(phase("alone-again", a, null));
                } finally {
                    a.stopAndJoin();
                    if (b != null && b.thread.isAlive()) b.stopAndJoin();
                }
                if (a.failure != null) throw new IllegalStateException("member a failed", a.failure);
            }
            out.put("phases", phases);
            synchronized (events) {
                out.put("events", new ArrayList<>(events));
            }
            synchronized (consumed) {
                out.put("consumed", new ArrayList<>(consumed));
            }
            Map<String, Object> committed = new TreeMap<>();
            admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().forEach(
                    (tp, om) -> committed.put(tp.toString(), om == null ? null : om.offset()));
            out.put("committed", committed);
        }
        return out;
    }

    static Map<String, Object> phase(String name, Member a, Member b) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("phase", name);
        m.put("a", new ArrayList<>(a.owned));
        if (b != null) m.put("b", new ArrayList<>(b.owned));
        return m;
    }

    static boolean disjoint(java.util.Set<String> x, java.util.Set<String> y) {
        for (String s : x) if (y.contains(s)) return false;
        return true;
    }

    static void produce(KafkaProducer<String, String> p, String topic, int partitions, String tag, int n)
            throws Exception {
        List<java.util.concurrent.Future<RecordMetadata>> acks = new ArrayList<>();
        for (int i = 0; i < n; i++) acks.add(p.send(new ProducerRecord<>(topic, i % partitions, "k" + i, tag + "-" + i)));
        for (java.util.concurrent.Future<RecordMetadata> f : acks) f.get();
    }

    static void awaitConsumed(List<Object> consumed, int n, long timeoutMs, Member... members) throws Exception {
        await(() -> {
            synchronized (consumed) {
                return consumed.size() >= n;
            }
        }, timeoutMs, n + " records consumed", members);
    }

    static void await(BooleanSupplier cond, long timeoutMs, String what, Member... members) throws Exception {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!cond.getAsBoolean()) {
            for (Member m : members) {
                if (m != null && m.failure != null) throw new IllegalStateException("member " + m.name + " failed", m.failure);
            }
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("timed out waiting for " + what);
            Thread.sleep(20);  // (the members' threads change this state; no event to wait on across them)
        }
    }

    private JavaClientData() {
    }
}
