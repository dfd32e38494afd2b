"""TLS, SASL (PLAIN, SCRAM-SHA-256/512) and ACLs on a real strand process, with librdkafka
(confluent-kafka), the Java client and Kafka's own kafka-configs / kafka-acls tools.

One broker serves four listeners: PLAINTEXT (refused everything by the ACLs), SASL_SSL,
SASL_PLAINTEXT (for hand-built requests) and SSL with optional client certificates (mTLS).
Certificates come from `openssl` in a temporary directory; the first user (`admin`, a super
user) is created with `strand user add` before the first start."""
import glob
import os
import shutil
import socket
import struct
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType,
                                   ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

import kafka_raw
from conftest import BINARY, Broker, free_port, until

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LIBS = os.environ.get("STRAND_JAVA_LIBS", os.path.join(ROOT, "target", "java-libs"))
needs_java = pytest.mark.skipif(
    shutil.which("java") is None or not glob.glob(os.path.join(LIBS, "kafka-tools-*.jar")),
    reason="java or the Kafka jars (scripts/test fetches them with Maven) are missing")
needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl missing")

ADMIN_PASSWORD = "admin-secret"
ALICE_PASSWORD = "alice-secret"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
            "-subj", f"/CN={name}", cwd=d)


def make_cert(d, name, subject, ca, ext):
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write(ext)
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=d)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
    with open(os.path.join(d, f"{name}-keystore.pem"), "w") as out:
        out.write(open(os.path.join(d, f"{name}.key")).read())
        out.write(open(os.path.join(d, f"{name}.pem")).read())


class Secure:
    """The secured broker and what clients need to reach it."""

    def __init__(self, tmp):
        self.dir = tmp
        make_ca(tmp, "ca")
        make_ca(tmp, "other-ca")
        make_cert(tmp, "broker", "/CN=localhost", "ca",
                  "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
        make_cert(tmp, "carol", "/O=Strand/CN=carol", "ca", "extendedKeyUsage=clientAuth\n")
        self.ca = os.path.join(tmp, "ca.pem")
        self.other_ca = os.path.join(tmp, "other-ca.pem")
        self.sasl_ssl, self.sasl_plain, self.ssl = free_port(), free_port(), free_port()
        self.data = os.path.join(tmp, "data")
        pw = os.path.join(tmp, "admin.password")
        open(pw, "w").write(ADMIN_PASSWORD + "\n")
        r = subprocess.run([BINARY, "user", "add", "admin", "--mechanism", "SCRAM-SHA-512",
                            "--mechanism", "SCRAM-SHA-256", "--password-file", pw,
                            "--data-dir", self.data], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "SCRAM-SHA-512 credential saved" in r.stdout
        self.broker = Broker(self.data, config={
            "listeners": "PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{ss},"
                         "SASL_PLAINTEXT://127.0.0.1:{sp},SSL://127.0.0.1:{ssl}",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": os.path.join(tmp, "broker-keystore.pem"),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.ca,
            "ssl.client.auth": "requested",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
        })
        cfg = self.broker.config
        cfg["listeners"] = cfg["listeners"].format(plain=self.broker.port, ss=self.sasl_ssl,
                                                   sp=self.sasl_plain, ssl=self.ssl)

    def sasl(self, user, password, mechanism="SCRAM-SHA-512", ca=None, **extra):
        return {"bootstrap.servers": f"127.0.0.1:{self.sasl_ssl}", "security.protocol": "SASL_SSL",
                "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                "ssl.ca.location": ca or self.ca, **extra}

    def admin(self):
        return AdminClient(self.sasl("admin", ADMIN_PASSWORD))

    def java_props(self, user, password, name):
        path = os.path.join(self.dir, f"{name}.properties")
        with open(path, "w") as f:
            f.write("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
                    f'required username="{user}" password="{password}";\n'
                    f"ssl.truststore.type=PEM\nssl.truststore.location={self.ca}\n")
        return path


def allow(admin, principal, resource_type, name, *ops, pattern=ResourcePatternType.LITERAL):
    bindings = [AclBinding(resource_type, name, pattern, principal, "*", op,
                           AclPermissionType.ALLOW) for op in ops]
    for f in admin.create_acls(bindings).values():
        f.result(10)


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl missing")
    s = Secure(str(tmp_path_factory.mktemp("security")))
    s.broker.start()
    until("the SASL_SSL listener", lambda: socket.create_connection(
        ("127.0.0.1", s.sasl_ssl), timeout=1).close() or True)
    admin = s.admin()
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
        ALICE_PASSWORD.encode())])["alice"].result(10)
    for t in ("sec-alice", "sec-other", "sec-carol", "sec-desc"):
        admin.create_topics([NewTopic(t, 1, 1)])[t].result(10)
    allow(admin, "User:alice", ResourceType.TOPIC, "sec-alice",
          AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)
    allow(admin, "User:alice", ResourceType.TOPIC, "sec-desc", AclOperation.DESCRIBE)
    allow(admin, "User:alice", ResourceType.GROUP, "g-alice", AclOperation.READ)
    allow(admin, "User:alice", ResourceType.GROUP, "perf-consumer", AclOperation.READ,
          pattern=ResourcePatternType.PREFIXED)
    allow(admin, "User:alice", ResourceType.TRANSACTIONAL_ID, "tx-alice", AclOperation.WRITE)
    allow(admin, "User:CN=carol,O=Strand", ResourceType.TOPIC, "sec-carol",
          AclOperation.WRITE, AclOperation.DESCRIBE)
    yield s
    s.broker.stop()


def produce_one(conf, topic, value=b"v", timeout=15):
    errors = []
    p = Producer({**conf, "message.timeout.ms": timeout * 1000,
                  "error_cb": lambda e: errors.append(e)})
    results = []
    p.produce(topic, value, on_delivery=lambda err, msg: results.append(err))
    p.flush(timeout + 5)
    return (results[0] if results else None), errors


def first_consumer_error(conf, group, topic, subscribe, limit_s=20):
    """The first error code a consumer in `group` sees on `topic` (None: none in time)."""
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    if subscribe:
        c.subscribe([topic])
    else:
        c.assign([TopicPartition(topic, 0, 0)])
    deadline = time.time() + limit_s
    try:
        while time.time() < deadline:
            m = c.poll(1)
            if m is not None and m.error() is not None:
                return m.error().code()
        return None
    finally:
        c.close()


def test_scram_512_over_tls_produces_and_consumes_what_acls_allow(secure):
    conf = secure.sasl("alice", ALICE_PASSWORD)
    err, _ = produce_one(conf, "sec-alice", b"hello")
    assert err is None, err
    c = Consumer({**conf, "group.id": "g-alice", "auto.offset.reset": "earliest"})
    c.subscribe(["sec-alice"])
    got = []
    deadline = time.time() + 30
    while not got and time.time() < deadline:
        m = c.poll(1)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    assert got == [b"hello"]
    # SCRAM-SHA-256 works too for a user with that credential (admin has both).
    err, _ = produce_one(secure.sasl("admin", ADMIN_PASSWORD, "SCRAM-SHA-256"), "sec-other")
    assert err is None, err


def test_denied_produce_consume_join_create_and_transactions_get_kafkas_errors(secure):
    conf = secure.sasl("alice", ALICE_PASSWORD)
    err, _ = produce_one(conf, "sec-other", timeout=10)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err

    # Consume: a topic alice may describe but not read fails the Fetch; one she may not even
    # describe fails the subscription (as librdkafka reports it against Kafka).
    for topic, subscribe in (("sec-desc", False), ("sec-other", True)):
        seen = first_consumer_error(conf, "g-alice", topic, subscribe)
        assert seen == KafkaError.TOPIC_AUTHORIZATION_FAILED, (topic, seen)
    seen = first_consumer_error(conf, "g-denied", "sec-alice", True)
    assert seen == KafkaError.GROUP_AUTHORIZATION_FAILED, seen

    a = AdminClient(conf)
    with pytest.raises(KafkaException) as e:
        a.create_topics([NewTopic("sec-new", 1, 1)])["sec-new"].result(10)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # Metadata hides what alice may not describe.
    topics = a.list_topics(timeout=10).topics
    assert "sec-alice" in topics and "sec-other" not in topics, sorted(topics)

    p = Producer({**conf, "transactional.id": "tx-denied"})
    with pytest.raises(KafkaException) as e:
        p.init_transactions(15)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, e.value
    p = Producer({**conf, "transactional.id": "tx-alice"})
    p.init_transactions(15)
    p.begin_transaction()
    p.produce("sec-alice", b"in-txn")
    p.commit_transaction(15)


def test_wrong_password_fails_with_sasl_authentication_failed(secure):
    _, errors = produce_one(secure.sasl("alice", "not-her-password"), "sec-alice", timeout=5)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert any("SASL authentication error" in e.str() for e in errors), errors
    # The wire answer: SASL_AUTHENTICATION_FAILED (58), then the connection closes.
    with socket.create_connection(("127.0.0.1", secure.sasl_plain), timeout=10) as sock:
        code, _ = sasl_handshake(sock, "PLAIN")
        assert code == 0
        sock.sendall(kafka_raw.framed(36, 1, 2, bytes_field(b"\0alice\0wrong")))
        body = kafka_raw.read_frame(sock)
        (error,) = struct.unpack(">h", body[4:6])
        assert error == 58
        assert kafka_raw.read_frame(sock) is None  # closed


def test_a_client_that_does_not_trust_the_ca_fails_the_handshake(secure):
    _, errors = produce_one(secure.sasl("alice", ALICE_PASSWORD, ca=secure.other_ca),
                            "sec-alice", timeout=5)
    assert errors, "no error from a client that does not trust the broker's CA"
    assert any(e.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
               for e in errors), errors


def test_mtls_client_certificate_is_the_principal(secure):
    base = {"bootstrap.servers": f"127.0.0.1:{secure.ssl}", "security.protocol": "SSL",
            "ssl.ca.location": secure.ca}
    with_cert = {**base, "ssl.certificate.location": os.path.join(secure.dir, "carol.pem"),
                 "ssl.key.location": os.path.join(secure.dir, "carol.key")}
    err, _ = produce_one(with_cert, "sec-carol")
    assert err is None, err
    err, _ = produce_one(base, "sec-carol", timeout=10)  # no certificate: User:ANONYMOUS
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


def sasl_handshake(sock, mechanism):
    sock.sendall(kafka_raw.framed(17, 1, 1, kafka_raw.s(mechanism)))
    body = kafka_raw.read_frame(sock)
    (code,) = struct.unpack(">h", body[4:6])
    return code, body


def bytes_field(b):
    return struct.pack(">i", len(b)) + b


def end_offset(secure, topic):
    c = Consumer({**secure.sasl("admin", ADMIN_PASSWORD), "group.id": "offsets-reader"})
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.close()
    return high


def test_unauthenticated_produce_and_fetch_are_refused_without_touching_a_partition(secure):
    before = end_offset(secure, "sec-alice")
    records = kafka_raw.batch(kafka_raw.record(0, b"k", b"unauthenticated"), 1, 0)
    for request in (kafka_raw.produce_v3("sec-alice", records),
                    kafka_raw.fetch_v4("sec-alice", [(0, 0, 1 << 20)])):
        with socket.create_connection(("127.0.0.1", secure.sasl_plain), timeout=10) as sock:
            sock.sendall(kafka_raw.api_versions_v0())
            assert kafka_raw.read_frame(sock) is not None  # ApiVersions is allowed
            sock.sendall(request)
            assert kafka_raw.read_frame(sock) is None  # closed, unanswered
    # A large frame is refused on its header: the broker does not wait for (or buffer) the body.
    with socket.create_connection(("127.0.0.1", secure.sasl_plain), timeout=10) as sock:
        sock.sendall(struct.pack(">ihhi", 50 << 20, 0, 3, 1))
        started = time.time()
        assert kafka_raw.read_frame(sock) is None
        assert time.time() - started < 5
    # PLAINTEXT is User:ANONYMOUS: the ACLs refuse it with Kafka's error, the log is untouched.
    body = kafka_raw.call(secure.broker.port, kafka_raw.produce_v3("sec-alice", records))
    assert kafka_raw.produce_error(body) == 29
    assert end_offset(secure, "sec-alice") == before
    # A SASL request on a non-SASL listener is an illegal state.
    with socket.create_connection(("127.0.0.1", secure.broker.port), timeout=10) as sock:
        code, _ = sasl_handshake(sock, "PLAIN")
        assert code == 34


def test_handshake_names_enabled_mechanisms_and_refuses_others(secure):
    with socket.create_connection(("127.0.0.1", secure.sasl_plain), timeout=10) as sock:
        code, body = sasl_handshake(sock, "GSSAPI")
        assert code == 33  # UNSUPPORTED_SASL_MECHANISM
        for m in (b"SCRAM-SHA-256", b"SCRAM-SHA-512", b"PLAIN"):
            assert m in body


@needs_java
def test_java_client_and_kafka_configs_and_kafka_acls_tools(secure):
    cp = os.path.join(LIBS, "*")
    admin = secure.java_props("admin", ADMIN_PASSWORD, "admin")
    bootstrap = f"127.0.0.1:{secure.sasl_ssl}"

    def tool(main, *args):
        r = subprocess.run(["java", "-cp", cp, main, "--bootstrap-server", bootstrap, *args],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        return r.stdout

    configs = "org.apache.kafka.tools.ConfigCommand"
    acls = "org.apache.kafka.tools.AclCommand"
    tool(configs, "--command-config", admin, "--alter", "--add-config",
         "SCRAM-SHA-512=[iterations=8192,password=dave-secret]", "--entity-type", "users",
         "--entity-name", "dave")
    out = tool(configs, "--command-config", admin, "--describe", "--entity-type", "users",
               "--entity-name", "dave")
    assert "SCRAM-SHA-512=iterations=8192" in out, out
    topic = f"sec-java-{uuid.uuid4().hex[:6]}"
    tool(acls, "--command-config", admin, "--add", "--allow-principal", "User:dave",
         "--operation", "Write", "--operation", "Read", "--operation", "Describe",
         "--operation", "Create", "--topic", topic)
    tool(acls, "--command-config", admin, "--add", "--allow-principal", "User:dave",
         "--operation", "Read", "--group", "perf-consumer", "--resource-pattern-type", "prefixed")
    out = tool(acls, "--command-config", admin, "--list", "--topic", topic)
    assert "User:dave" in out and "WRITE" in out, out

    dave = secure.java_props("dave", "dave-secret", "dave")
    r = subprocess.run(["java", "-cp", cp, "org.apache.kafka.tools.ProducerPerformance",
                        "--topic", topic, "--num-records", "2000", "--record-size", "100",
                        "--throughput", "-1", "--producer.config", dave,
                        "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all"],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and "2000 records sent" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    r = subprocess.run(["java", "-cp", cp, "org.apache.kafka.tools.ConsumerPerformance",
                        "--bootstrap-server", bootstrap, "--topic", topic, "--messages", "2000",
                        "--timeout", "60000", "--command-config", dave],
                       capture_output=True, text=True, timeout=180)
    rows = [l for l in r.stdout.splitlines() if l and l[0].isdigit()]
    assert r.returncode == 0 and rows and rows[-1].split(",")[4].strip() == "2000", \
        r.stdout[-2000:] + r.stderr[-2000:]

    # Removing the ACL takes the permission away (an idempotent producer with WRITE on no
    # topic would be refused earlier, at InitProducerId, with CLUSTER_AUTHORIZATION_FAILED,
    # as Kafka does); a wrong password is refused.
    tool(acls, "--command-config", admin, "--remove", "--force", "--allow-principal", "User:dave",
         "--operation", "Write", "--topic", topic)
    r = subprocess.run(["java", "-cp", cp, "org.apache.kafka.tools.ProducerPerformance",
                        "--topic", topic, "--num-records", "10", "--record-size", "10",
                        "--throughput", "-1", "--producer.config", dave,
                        "--producer-props", f"bootstrap.servers={bootstrap}", "delivery.timeout.ms=10000",
                        "request.timeout.ms=5000", "enable.idempotence=false"],
                       capture_output=True, text=True, timeout=120)
    assert "TopicAuthorizationException" in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
    wrong = secure.java_props("dave", "wrong", "dave-wrong")
    r = subprocess.run(["java", "-cp", cp, "org.apache.kafka.tools.ProducerPerformance",
                        "--topic", topic, "--num-records", "1", "--record-size", "10",
                        "--throughput", "-1", "--producer.config", wrong,
                        "--producer-props", f"bootstrap.servers={bootstrap}", "max.block.ms=10000"],
                       capture_output=True, text=True, timeout=120)
    assert "SaslAuthenticationException" in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-2000:]


def test_users_and_acls_survive_a_restart(secure):
    secure.broker.stop()
    secure.broker.start()
    until("the SASL_SSL listener after restart", lambda: socket.create_connection(
        ("127.0.0.1", secure.sasl_ssl), timeout=1).close() or True)
    err, _ = produce_one(secure.sasl("alice", ALICE_PASSWORD), "sec-alice", b"after-restart")
    assert err is None, err
    err, _ = produce_one(secure.sasl("alice", ALICE_PASSWORD), "sec-other", timeout=10)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


@needs_openssl
def test_required_client_auth_refuses_a_client_without_a_certificate(tmp_path):
    d = str(tmp_path)
    make_ca(d, "ca")
    make_cert(d, "broker", "/CN=localhost", "ca",
              "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    make_cert(d, "client", "/CN=client", "ca", "extendedKeyUsage=clientAuth\n")
    ssl_port = free_port()
    b = Broker(os.path.join(d, "data"), config={
        "ssl.keystore.location": os.path.join(d, "broker-keystore.pem"),
        "ssl.truststore.location": os.path.join(d, "ca.pem"),
        "ssl.client.auth": "required",
    })
    b.config["listeners"] = f"PLAINTEXT://127.0.0.1:{b.port},SSL://127.0.0.1:{ssl_port}"
    b.start()
    try:
        base = {"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL",
                "ssl.ca.location": os.path.join(d, "ca.pem")}
        err, errors = produce_one(base, "mtls", timeout=5)
        assert err is not None and errors, (err, errors)
        err, _ = produce_one({**base, "ssl.certificate.location": os.path.join(d, "client.pem"),
                              "ssl.key.location": os.path.join(d, "client.key")}, "mtls")
        assert err is None, err  # no authoriser: an authenticated client may do anything
    finally:
        b.stop()


def test_a_tls_listener_without_a_keystore_is_refused_at_start(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(f'listeners = "SASL_SSL://127.0.0.1:{free_port()}"\n')
    r = subprocess.run([BINARY, "serve", "--config", str(path), "--data-dir", str(tmp_path / "d")],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "ssl.keystore.location" in r.stderr, r.stderr


def test_strand_cli_and_bench_take_client_settings(secure):
    settings = ["-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanism=SCRAM-SHA-512",
                "-X", "sasl.username=alice", "-X", f"sasl.password={ALICE_PASSWORD}",
                "-X", f"ssl.ca.location={secure.ca}"]
    bootstrap = f"127.0.0.1:{secure.sasl_ssl}"
    r = subprocess.run([BINARY, "topic", "list", "--brokers", bootstrap, *settings],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "sec-alice" in r.stdout and "sec-other" not in r.stdout, r.stdout
    # A properties file in Java's names works the same.
    props = secure.java_props("alice", ALICE_PASSWORD, "alice-cli")
    r = subprocess.run([BINARY, "topic", "list", "--brokers", bootstrap, "--command-config", props],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "sec-alice" in r.stdout, r.stderr
    r = subprocess.run([BINARY, "topic", "list", "--brokers", bootstrap,
                        *settings[:6], "-X", "sasl.password=wrong", *settings[8:]],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "SASL" in r.stderr, r.stderr
    # strand bench, as the super user, over SASL_SSL.
    r = subprocess.run([BINARY, "bench", "run", "--bootstrap", bootstrap, "--duration", "2s",
                        "--warmup", "1s", "--rate", "1000", "--out", secure.dir,
                        "--config", "security.protocol=SASL_SSL",
                        "--config", "sasl.mechanism=SCRAM-SHA-512", "--config", "sasl.username=admin",
                        "--config", f"sasl.password={ADMIN_PASSWORD}",
                        "--config", f"ssl.truststore.location={secure.ca}"],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    import json
    report = sorted(glob.glob(os.path.join(secure.dir, "strand-bench-*.json")))[-1]
    summary = json.load(open(report))["runs"][0]["summary"]
    assert summary["records_acked"] > 0 and summary["errors"] == 0, summary


def test_sessions_expire_and_clients_reauthenticate(tmp_path):
    """KIP-368: with `connections.max.reauth.ms` the broker answers the session lifetime and
    closes a connection that outlives it without re-authenticating; librdkafka re-authenticates
    on the same connection and loses nothing."""
    d = str(tmp_path)
    pw = os.path.join(d, "pw")
    open(pw, "w").write("reauth-secret\n")
    data = os.path.join(d, "data")
    r = subprocess.run([BINARY, "user", "add", "erin", "--password-file", pw, "--data-dir", data],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    sasl_port = free_port()
    b = Broker(data, config={"connections.max.reauth.ms": 1500,
                             "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN"})
    b.config["listeners"] = f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    b.start()
    try:
        # The wire: the lifetime is answered, and a request after it closes the connection.
        with socket.create_connection(("127.0.0.1", sasl_port), timeout=10) as sock:
            assert sasl_handshake(sock, "PLAIN")[0] == 0
            sock.sendall(kafka_raw.framed(36, 1, 2, bytes_field(b"\0erin\0reauth-secret")))
            body = kafka_raw.read_frame(sock)
            (error,) = struct.unpack(">h", body[4:6])
            assert error == 0
            (lifetime,) = struct.unpack(">q", body[-8:])
            assert lifetime == 1500
            sock.sendall(kafka_raw.metadata_v1([]))
            assert kafka_raw.read_frame(sock) is not None
            time.sleep(2)
            sock.sendall(kafka_raw.metadata_v1([]))
            assert kafka_raw.read_frame(sock) is None  # expired: closed
        # A client that re-authenticates keeps its connection and loses nothing.
        conf = {"bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "erin",
                "sasl.password": "reauth-secret"}
        errors, delivered = [], []
        p = Producer({**conf, "error_cb": lambda e: errors.append(e)})
        for i in range(25):
            p.produce("reauth", str(i).encode(),
                      on_delivery=lambda err, msg: delivered.append(err))
            p.poll(0.2)
        p.flush(15)
        assert len(delivered) == 25 and all(e is None for e in delivered), delivered
        assert not [e for e in errors if e.code() == KafkaError._AUTHENTICATION], errors
    finally:
        b.stop()
