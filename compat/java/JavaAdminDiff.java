// The "admin-diff" scenario of SamsaJavaClient: one run of Kafka's own Admin client against a
// broker, for tests/compat/test_admin_vs_kafka.py, which runs it against Apache Kafka and against
// Samsa and compares the two results step by step.
//
// Each step is a call (or a few) whose answer a client acts on, most of them ones that must
// fail: the result holds its value, or {"error": the exception class} (JavaClientAdmin.attempt).
// The result is {section: {step: outcome}}. Nothing broker-specific is kept: every name made from
// the run's prefix is written with "P" in its place, a node id as "node" (the one broker),
// timestamps as the difference from the records' base time, producer ids and epochs as
// "the same" / differences, cluster ids and paths as whether they are set.
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Callable;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

final class JavaAdminDiff {

    private final Admin admin;
    private final String bootstrap;
    private final String prefix;
    private final String topic;
    private int node = -1;
    private final long t0 = (System.currentTimeMillis() / 1000 - 60) * 1000;  // records' base time
    private final Map<String, Map<String, Object>> out = new LinkedHashMap<>();

    private JavaAdminDiff(Admin admin, String bootstrap, String prefix) {
        this.admin = admin;
        this.bootstrap = bootstrap;
        this.prefix = prefix;
        this.topic = prefix + "-t";
    }

    static Map<String, Object> run(Map<String, Object> spec) throws Exception {
        String bootstrap = SamsaJavaClient.str(spec, "bootstrap"), prefix = SamsaJavaClient.str(spec, "prefix");
        try (Admin admin = SamsaJavaClient.admin(bootstrap)) {
            JavaAdminDiff d = new JavaAdminDiff(admin, bootstrap, prefix);
            d.cluster();
            d.topics();
            d.configs();
            d.partitions();
            d.records();
            d.groups();
            d.transactions();
            d.leaders();
            d.security();
            d.cleanup();
            @SuppressWarnings("unchecked")
            Map<String, Object> result = (Map<String, Object>) d.normalise(d.out);
            return result;
        }
    }

    /** Run one step into `section`: its value, or the class of the exception it threw. */
    private void step(String section, String name, Callable<Object> call) {
        out.computeIfAbsent(section, k -> new LinkedHashMap<>()).put(name, JavaClientAdmin.attempt(call));
    }

    /** The run's names written with "P" for the prefix, everywhere in the result. */
    private Object normalise(Object v) {
        if (v instanceof Map) {
            Map<String, Object> m = new LinkedHashMap<>();
            ((Map<?, ?>) v).forEach((k, x) -> m.put(String.valueOf(normalise(String.valueOf(k))), normalise(x)));
            return m;
        }
        if (v instanceof Collection) {
            List<Object> l = new ArrayList<>();
            for (Object x : (Collection<?>) v) l.add(normalise(x));
            return l;
        }
        if (v instanceof String) return ((String) v).replace(prefix, "P");
        if (v instanceof TopicPartition) return normalise(v.toString());
        return v;
    }

    private Object nodeId(int id) {
        return id == node ? "node" : (Object) id;
    }

    private List<Object> nodes(Collection<Node> ns) {
        List<Object> l = new ArrayList<>();
        for (Node n : ns) l.add(nodeId(n.id()));
        return l;
    }

    // -- cluster ------------------------------------------------------------------------------

    private void cluster() throws Exception {
        node = admin.describeCluster().nodes().get().iterator().next().id();
        step("cluster", "describeCluster: nodes, controller, cluster id set", () -> {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("nodes", nodes(admin.describeCluster().nodes().get()));
            m.put("controller", nodeId(admin.describeCluster().controller().get().id()));
            m.put("clusterIdSet", admin.describeCluster().clusterId().get() != null);
            return m;
        });
        step("cluster", "describeFeatures: finalized transaction.version, group.version", () -> {
            FeatureMetadata f = admin.describeFeatures().featureMetadata().get();
            Map<String, Object> m = new TreeMap<>();
            for (String feature : List.of("transaction.version", "group.version")) {
                m.put(feature, f.finalizedFeatures().containsKey(feature)
                        ? f.finalizedFeatures().get(feature).maxVersionLevel() : null);
            }
            return m;
        });
    }

    // -- topics -------------------------------------------------------------------------------

    private void topics() {
        Map<String, String> configs = Map.of("retention.ms", "3600000");
        step("topics", "create (2 partitions, RF 1, retention.ms)", () -> {
            CreateTopicsResult r = admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1).configs(configs)));
            r.all().get();
            return List.of(r.numPartitions(topic).get(), r.replicationFactor(topic).get(),
                    r.config(topic).get().get("retention.ms").value());
        });
        step("topics", "create it again", () -> create(new NewTopic(topic, 2, (short) 1)));
        step("topics", "create with 0 partitions", () -> create(new NewTopic(prefix + "-bad", 0, (short) 1)));
        step("topics", "create with RF 3", () -> create(new NewTopic(prefix + "-bad", 1, (short) 3)));
        step("topics", "create with retention.ms=soon", () -> create(
                new NewTopic(prefix + "-bad", 1, (short) 1).configs(Map.of("retention.ms", "soon"))));
        step("topics", "create with an unknown config", () -> create(
                new NewTopic(prefix + "-bad", 1, (short) 1).configs(Map.of("no.such.config", "1"))));
        step("topics", "create named 'bad/name'", () -> create(new NewTopic("bad/name", 1, (short) 1)));
        step("topics", "create, validate only; then describe it", () -> {
            admin.createTopics(List.of(new NewTopic(prefix + "-v", 3, (short) 1)),
                    new CreateTopicsOptions().validateOnly(true)).all().get();
            return JavaClientAdmin.attempt(() -> describe(prefix + "-v"));
        });
        step("topics", "describe", () -> describe(topic));
        step("topics", "describe an unknown topic", () -> describe(prefix + "-missing"));
        step("topics", "describe an unknown topic id", () ->
                admin.describeTopics(TopicCollection.ofTopicIds(List.of(Uuid.randomUuid()))).allTopicIds().get());
        step("topics", "listTopics has it", () -> admin.listTopics().names().get().contains(topic));
    }

    private Object create(NewTopic t) throws Exception {
        admin.createTopics(List.of(t)).all().get();
        return "created";
    }

    private Object describe(String name) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(name)).allTopicNames().get().get(name);
        List<Object> parts = new ArrayList<>();
        for (TopicPartitionInfo p : d.partitions()) {
            parts.add(List.of(p.partition(), p.leader() == null ? "none" : nodeId(p.leader().id()), nodes(p.replicas()),
                    nodes(p.isr())));
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("internal", d.isInternal());
        m.put("partitions (leader, replicas, isr)", parts);
        return m;
    }

    // -- configs ------------------------------------------------------------------------------

    private static final List<String> TOPIC_KEYS = List.of("retention.ms", "cleanup.policy", "max.message.bytes",
            "segment.bytes");
    private static final List<String> BROKER_KEYS = List.of("log.retention.hours", "message.max.bytes",
            "num.partitions", "log.segment.bytes", "log.cleanup.policy");

    private void configs() {
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        ConfigResource missing = new ConfigResource(ConfigResource.Type.TOPIC, prefix + "-missing");
        step("configs", "describe the topic's (value, source, default, read-only, synonyms)", () -> config(res, TOPIC_KEYS));
        step("configs", "describe the broker's", () -> config(
                new ConfigResource(ConfigResource.Type.BROKER, String.valueOf(node)), BROKER_KEYS));
        step("configs", "SET retention.ms=soon", () -> alter(res, op("retention.ms", "soon", AlterConfigOp.OpType.SET)));
        step("configs", "SET an unknown key", () -> alter(res, op("no.such.config", "1", AlterConfigOp.OpType.SET)));
        step("configs", "APPEND to retention.ms (not a list)", () -> alter(res,
                op("retention.ms", "5", AlterConfigOp.OpType.APPEND)));
        step("configs", "DELETE an unknown key", () -> alter(res, op("no.such.config", "", AlterConfigOp.OpType.DELETE)));
        step("configs", "SET retention.ms=1, validate only; then its value", () -> {
            admin.incrementalAlterConfigs(Map.of(res, List.of(op("retention.ms", "1", AlterConfigOp.OpType.SET))),
                    new AlterConfigsOptions().validateOnly(true)).all().get();
            return admin.describeConfigs(List.of(res)).all().get().get(res).get("retention.ms").value();
        });
        step("configs", "SET retention.ms, DELETE max.message.bytes, APPEND compact to cleanup.policy", () -> alter(res,
                op("retention.ms", "7200000", AlterConfigOp.OpType.SET),
                op("max.message.bytes", "", AlterConfigOp.OpType.DELETE),
                op("cleanup.policy", "compact", AlterConfigOp.OpType.APPEND)));
        step("configs", "describe after", () -> config(res, TOPIC_KEYS));
        step("configs", "SUBTRACT delete from cleanup.policy; then its value", () -> {
            alter(res, op("cleanup.policy", "delete", AlterConfigOp.OpType.SUBTRACT));
            return admin.describeConfigs(List.of(res)).all().get().get(res).get("cleanup.policy").value();
        });
        step("configs", "SET cleanup.policy=delete again", () -> alter(res,
                op("cleanup.policy", "delete", AlterConfigOp.OpType.SET)));
        step("configs", "alter an unknown topic", () -> alter(missing, op("retention.ms", "1000",
                AlterConfigOp.OpType.SET)));
        step("configs", "describe an unknown topic", () -> admin.describeConfigs(List.of(missing)).all().get());
    }

    private static AlterConfigOp op(String key, String value, AlterConfigOp.OpType type) {
        return new AlterConfigOp(new ConfigEntry(key, value), type);
    }

    private Object alter(ConfigResource res, AlterConfigOp... ops) throws Exception {
        admin.incrementalAlterConfigs(Map.of(res, List.of(ops))).all().get();
        return "altered";
    }

    private Object config(ConfigResource res, List<String> keys) throws Exception {
        Config c = admin.describeConfigs(List.of(res), new DescribeConfigsOptions().includeSynonyms(true))
                .all().get().get(res);
        Map<String, Object> m = new LinkedHashMap<>();
        for (String key : keys) {
            ConfigEntry e = c.get(key);
            if (e == null) {
                m.put(key, null);
                continue;
            }
            List<Object> synonyms = new ArrayList<>();
            for (ConfigEntry.ConfigSynonym s : e.synonyms()) synonyms.add(s.name() + "=" + s.value() + " " + s.source());
            m.put(key, List.of(String.valueOf(e.value()), e.source().toString(), e.isDefault(), e.isReadOnly(),
                    synonyms));
        }
        return m;
    }

    // -- partitions ---------------------------------------------------------------------------

    private void partitions() {
        step("partitions", "to 1 (fewer)", () -> partitionsTo(topic, 1, false));
        step("partitions", "to 2 (the same)", () -> partitionsTo(topic, 2, false));
        step("partitions", "to 5, validate only", () -> partitionsTo(topic, 5, true));
        step("partitions", "to 3", () -> partitionsTo(topic, 3, false));
        step("partitions", "of an unknown topic", () -> partitionsTo(prefix + "-missing", 2, false));
        step("partitions", "count after", () ->
                admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size());
    }

    private Object partitionsTo(String name, int count, boolean validateOnly) throws Exception {
        admin.createPartitions(Map.of(name, NewPartitions.increaseTo(count)),
                new CreatePartitionsOptions().validateOnly(validateOnly)).all().get();
        return "increased";
    }

    // -- records ------------------------------------------------------------------------------

    private void records() throws Exception {
        // 10 records at partition 0, timestamps t0 + 10 i, but the 6th (offset 5) at t0 + 1000
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < 10; i++) {
                p.send(new ProducerRecord<>(topic, 0, t0 + (i == 5 ? 1000 : 10 * i), "k" + i, "v" + i)).get();
            }
        }
        TopicPartition tp0 = new TopicPartition(topic, 0);
        step("records", "listOffsets earliest", () -> offset(tp0, OffsetSpec.earliest()));
        step("records", "latest", () -> offset(tp0, OffsetSpec.latest()));
        step("records", "max timestamp", () -> offset(tp0, OffsetSpec.maxTimestamp()));
        step("records", "by timestamp t0+15", () -> offset(tp0, OffsetSpec.forTimestamp(t0 + 15)));
        step("records", "by timestamp t0+95 (after all but the 6th)", () -> offset(tp0, OffsetSpec.forTimestamp(t0 + 95)));
        step("records", "by timestamp t0+5000 (after all)", () -> offset(tp0, OffsetSpec.forTimestamp(t0 + 5000)));
        step("records", "earliest local", () -> offset(tp0, OffsetSpec.earliestLocal()));
        step("records", "deleteRecords before 4", () -> deleteRecords(tp0, 4));
        step("records", "earliest after", () -> offset(tp0, OffsetSpec.earliest()));
        step("records", "deleteRecords before 99 (beyond the high watermark)", () -> deleteRecords(tp0, 99));
        step("records", "deleteRecords of partition 2 before -1 (its high watermark)", () -> deleteRecords(
                new TopicPartition(topic, 2), -1));
        step("records", "deleteRecords of a topic with cleanup.policy=compact", () -> {
            String compacted = prefix + "-compacted";
            admin.createTopics(List.of(new NewTopic(compacted, 1, (short) 1)
                    .configs(Map.of("cleanup.policy", "compact")))).all().get();
            return deleteRecords(new TopicPartition(compacted, 0), -1);
        });
    }

    private Object offset(TopicPartition tp, OffsetSpec spec) throws Exception {
        ListOffsetsResult.ListOffsetsResultInfo i = admin.listOffsets(Map.of(tp, spec)).partitionResult(tp).get();
        return List.of(i.offset(), i.timestamp() >= 0 ? i.timestamp() - t0 : i.timestamp());
    }

    private Object deleteRecords(TopicPartition tp, long before) throws Exception {
        return admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(before))).lowWatermarks().get(tp).get()
                .lowWatermark();
    }

    // -- consumer groups ----------------------------------------------------------------------

    private KafkaConsumer<String, String> consumer(String group, String protocol) {
        Properties cp = SamsaJavaClient.consumerProps(bootstrap, "read_uncommitted");
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        KafkaConsumer<String, String> c = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer());
        c.subscribe(List.of(topic));
        long deadline = System.currentTimeMillis() + 60_000;
        int got = 0;
        while (got < 6) {  // (partition 0's records after deleteRecords)
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException(group + " read " + got);
            got += c.poll(Duration.ofMillis(200)).count();
        }
        c.commitSync(Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(10)));
        return c;
    }

    private void groups() throws Exception {
        String classic = prefix + "-classic", kip848 = prefix + "-consumer";
        TopicPartition tp0 = new TopicPartition(topic, 0);
        try (KafkaConsumer<String, String> c = consumer(classic, "classic");
             KafkaConsumer<String, String> c2 = consumer(kip848, "consumer")) {
            step("groups", "partitions each consumer has (classic, consumer)", () -> List.of(
                    JavaClientData.names(c.assignment()), JavaClientData.names(c2.assignment())));
            step("groups", "listGroups of consumer groups, Stable", () -> listGroups(
                    ListGroupsOptions.forConsumerGroups().inGroupStates(Set.of(org.apache.kafka.common.GroupState.STABLE))));
            step("groups", "listGroups of type consumer", () -> listGroups(
                    new ListGroupsOptions().withTypes(Set.of(GroupType.CONSUMER))));
            step("groups", "describe the classic group", () -> describeGroup(classic));
            step("groups", "describe the consumer (KIP-848) group", () -> describeGroup(kip848));
            step("groups", "alterConsumerGroupOffsets of the active classic group", () -> {
                admin.alterConsumerGroupOffsets(classic, Map.of(tp0, new OffsetAndMetadata(5))).all().get();
                return "altered";
            });
            step("groups", "alterConsumerGroupOffsets of the active consumer group", () -> {
                admin.alterConsumerGroupOffsets(kip848, Map.of(tp0, new OffsetAndMetadata(5))).all().get();
                return "altered";
            });
            step("groups", "deleteConsumerGroupOffsets of a subscribed topic", () -> {
                admin.deleteConsumerGroupOffsets(classic, Set.of(tp0)).all().get();
                return "deleted";
            });
            step("groups", "deleteConsumerGroups of the active groups", () -> deleteGroups(classic, kip848));
        }
        step("groups", "describe the classic group, closed", () -> describeGroup(classic));
        step("groups", "describe the consumer group, closed", () -> describeGroup(kip848));
        step("groups", "listConsumerGroupOffsets", () -> groupOffsets(classic));
        step("groups", "alterConsumerGroupOffsets, then list", () -> {
            admin.alterConsumerGroupOffsets(classic, Map.of(tp0, new OffsetAndMetadata(7, "seven"),
                    new TopicPartition(topic, 1), new OffsetAndMetadata(0))).all().get();
            return groupOffsets(classic);
        });
        step("groups", "alterConsumerGroupOffsets of partition 9 (none)", () -> {
            admin.alterConsumerGroupOffsets(classic, Map.of(new TopicPartition(topic, 9), new OffsetAndMetadata(1)))
                    .all().get();
            return "altered";
        });
        step("groups", "deleteConsumerGroupOffsets, then list", () -> {
            admin.deleteConsumerGroupOffsets(classic, Set.of(tp0)).all().get();
            return groupOffsets(classic);
        });
        step("groups", "describe an unknown group", () -> describeGroup(prefix + "-missing"));
        step("groups", "listConsumerGroupOffsets of an unknown group", () -> groupOffsets(prefix + "-missing"));
        step("groups", "deleteConsumerGroups", () -> deleteGroups(classic, kip848));
        step("groups", "deleteConsumerGroups again", () -> deleteGroups(classic));
    }

    private Object listGroups(ListGroupsOptions options) throws Exception {
        Map<String, Object> m = new TreeMap<>();
        for (GroupListing g : admin.listGroups(options).all().get()) {
            if (!g.groupId().startsWith(prefix)) continue;
            m.put(g.groupId(), List.of(g.type().map(Object::toString).orElse("-"), g.protocol(),
                    g.groupState().map(Object::toString).orElse("-")));
        }
        return m;
    }

    private Object describeGroup(String group) throws Exception {
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("state", d.groupState().toString());
        m.put("type", d.type().toString());
        m.put("assignor", d.partitionAssignor());
        m.put("simple", d.isSimpleConsumerGroup());
        m.put("coordinator", d.coordinator() == null ? null : nodeId(d.coordinator().id()));
        List<Object> members = new ArrayList<>();
        for (MemberDescription md : d.members()) {
            members.add(List.of(md.clientId().isEmpty() ? "" : "client id set", md.host().isEmpty() ? "" : "host set",
                    new ArrayList<>(JavaClientData.names(md.assignment().topicPartitions()))));
        }
        m.put("members (client id, host, assignment)", members);
        return m;
    }

    private Object groupOffsets(String group) throws Exception {
        Map<String, Object> m = new TreeMap<>();
        admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().forEach((tp, om) ->
                m.put(tp.toString(), om == null ? null : List.of(om.offset(), om.metadata())));
        return m;
    }

    private Object deleteGroups(String... groups) throws Exception {
        Map<String, Object> m = new TreeMap<>();
        admin.deleteConsumerGroups(List.of(groups)).deletedGroups().forEach((g, f) ->
                m.put(g, JavaClientAdmin.attempt(() -> {
                    f.get();
                    return "deleted";
                })));
        return m;
    }

    // -- transactions -------------------------------------------------------------------------

    private void transactions() throws Exception {
        String tid = prefix + "-tx";
        TopicPartition tp1 = new TopicPartition(topic, 1);
        KafkaProducer<String, String> p = SamsaJavaClient.transactionalProducer(bootstrap, tid);
        try {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, 1, "k", "v1"));
            p.send(new ProducerRecord<>(topic, 1, "k", "v2"));
            p.flush();
            long[] own = SamsaJavaClient.clientProducerIdAndEpoch(p);
            step("transactions", "listTransactions, Ongoing", () -> listTransactions(
                    new ListTransactionsOptions().filterStates(List.of(TransactionState.ONGOING))));
            step("transactions", "listTransactions, by producer id", () -> listTransactions(
                    new ListTransactionsOptions().filterProducerIds(List.of(own[0]))));
            step("transactions", "describeTransactions", () -> describeTxn(tid, own));
            step("transactions", "describeTransactions of an unknown id", () -> describeTxn(prefix + "-missing", own));
            step("transactions", "describeProducers of the partition", () -> producers(tp1, own));
            step("transactions", "fenceProducers", () -> {
                admin.fenceProducers(List.of(tid)).all().get();
                return "fenced";
            });
            step("transactions", "the fenced producer's commit", () -> {
                p.commitTransaction();
                return "committed";
            });
            step("transactions", "describeTransactions once the fencing is done", () -> {
                long deadline = System.currentTimeMillis() + 60_000;
                Set<TransactionState> settled = Set.of(TransactionState.EMPTY, TransactionState.COMPLETE_ABORT);
                while (!settled.contains(admin.describeTransactions(List.of(tid)).description(tid).get().state())) {
                    if (System.currentTimeMillis() > deadline) throw new IllegalStateException("not settled");
                    Thread.sleep(20);  // (the abort's markers are written in the background: polled)
                }
                return describeTxn(tid, own);
            });
            step("transactions", "describeProducers after", () -> producers(tp1, own));
        } finally {
            p.close(Duration.ZERO);
        }
    }

    private Object listTransactions(ListTransactionsOptions options) throws Exception {
        Map<String, Object> m = new TreeMap<>();
        for (TransactionListing t : admin.listTransactions(options).all().get()) {
            if (t.transactionalId().startsWith(prefix)) m.put(t.transactionalId(), t.state().toString());
        }
        return m;
    }

    private Object describeTxn(String tid, long[] own) throws Exception {
        TransactionDescription d = admin.describeTransactions(List.of(tid)).description(tid).get();
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("state", d.state().toString());
        m.put("coordinator", nodeId(d.coordinatorId()));
        m.put("producer id", d.producerId() == own[0] ? "the producer's" : "another");
        m.put("epoch - the producer's", d.producerEpoch() - own[1]);
        m.put("timeout", d.transactionTimeoutMs());
        m.put("start time set", d.transactionStartTimeMs().isPresent());
        m.put("partitions", new ArrayList<>(JavaClientData.names(d.topicPartitions())));
        return m;
    }

    private Object producers(TopicPartition tp, long[] own) throws Exception {
        List<Object> l = new ArrayList<>();
        for (ProducerState ps : admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()) {
            if (ps.producerId() != own[0]) continue;  // (the records producer's is there too)
            l.add(List.of(ps.producerEpoch() - own[1], ps.lastSequence(),
                    ps.currentTransactionStartOffset().orElse(-1L), ps.coordinatorEpoch().orElse(-1)));
        }
        return Map.of("the producer's (epoch - its own, last sequence, transaction start, coordinator epoch)", l);
    }

    // -- leaders, log dirs --------------------------------------------------------------------

    private void leaders() {
        TopicPartition tp0 = new TopicPartition(topic, 0);
        for (ElectionType type : ElectionType.values()) {
            step("leaders", "electLeaders " + type + " of an RF 1 partition", () -> elect(type, tp0));
        }
        step("leaders", "electLeaders PREFERRED of partition 9 (none)", () -> elect(ElectionType.PREFERRED,
                new TopicPartition(topic, 9)));
        step("leaders", "describeLogDirs: (dirs, error, the partition's offset lag, future, size set)", () -> {
            Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(node)).allDescriptions().get().get(node);
            List<Object> l = new ArrayList<>();
            for (LogDirDescription d : dirs.values()) {
                ReplicaInfo r = d.replicaInfos().get(tp0);
                l.add(List.of(d.error() == null ? "none" : d.error().getClass().getName(),
                        r == null ? "absent" : List.of(r.offsetLag(), r.isFuture(), r.size() > 0)));
            }
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("dirs", dirs.size());
            m.put("each", l);
            return m;
        });
        step("leaders", "listPartitionReassignments", () -> admin.listPartitionReassignments().reassignments().get()
                .keySet().toString());
    }

    private Object elect(ElectionType type, TopicPartition tp) throws Exception {
        Map<TopicPartition, Optional<Throwable>> r = admin.electLeaders(type, Set.of(tp)).partitions().get();
        Optional<Throwable> e = r.get(tp);
        return e == null ? "absent" : e.map(t -> (Object) Map.of("error", t.getClass().getName())).orElse("elected");
    }

    // -- security -----------------------------------------------------------------------------

    private void security() {
        AclBinding binding = new AclBinding(new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW));
        step("security", "describeAcls (no authorizer)", () -> admin.describeAcls(AclBindingFilter.ANY).values().get());
        step("security", "createAcls", () -> {
            admin.createAcls(List.of(binding)).all().get();
            return "created";
        });
        step("security", "deleteAcls", () -> admin.deleteAcls(List.of(AclBindingFilter.ANY)).all().get().size());
        step("security", "describeUserScramCredentials", () -> admin.describeUserScramCredentials().all().get());
        step("security", "describeClientQuotas", () -> admin.describeClientQuotas(ClientQuotaFilter.all())
                .entities().get().size());
    }

    // -- topic deletion -----------------------------------------------------------------------

    private void cleanup() {
        step("cleanup", "deleteTopics of an unknown topic", () -> {
            admin.deleteTopics(List.of(prefix + "-missing")).all().get();
            return "deleted";
        });
        step("cleanup", "deleteTopics", () -> {
            admin.deleteTopics(List.of(topic)).all().get();
            return "deleted";
        });
    }
}
