"""The chaos harness's cluster and faults (#19): N real `strand serve` processes, each in a
network namespace of its own that this module creates (a veth pair per node to a bridge in
the root namespace; node n at 10.<net>.0.(10+n), clients in the root namespace at
10.<net>.0.1), so network faults are real packet loss made with iptables *inside* the nodes'
namespaces. Where namespaces cannot be made (not root, no `ip` or `iptables`) the nodes run
on 127.0.0.1 and only process faults are possible.

Faults (`Faults.start(kind, ...)` / `Faults.heal()`):
- isolate: one node cut from the other nodes (clients still reach it);
- split: a minority cut from the majority;
- bridge: two halves cut from each other, one node (the bridge) still sees both;
- oneway: one node stops hearing another (packets one way only);
- flap: one node isolated and healed every second, for the fault's duration;
- kill: `kill -9`, restarted at heal; pause: SIGSTOP, SIGCONT at heal;
- restart: every node killed with `kill -9` at once, all restarted at heal.
"""
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from conftest import BINARY, until  # noqa: E402

NETWORK_FAULTS = ("isolate", "split", "bridge", "oneway", "flap")
PROCESS_FAULTS = ("kill", "pause", "restart")
FAULTS = NETWORK_FAULTS + PROCESS_FAULTS


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


def namespaces_possible():
    return (os.geteuid() == 0 and shutil.which("ip") is not None
            and shutil.which("iptables") is not None)


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Net:
    """The bridge and one namespace per node (`netns`), or loopback (`None`)."""

    def __init__(self, nodes, net=77, use_namespaces=True):
        self.nodes = nodes
        self.net = net
        self.enabled = use_namespaces and namespaces_possible()
        self.bridge = f"strandch{net}"
        self.made = []

    def ns(self, n):
        return f"strand-chaos-{self.net}-{n}" if self.enabled else None

    def ip(self, n):
        return f"10.{self.net}.0.{10 + n}" if self.enabled else "127.0.0.1"

    def up(self):
        if not self.enabled:
            return self
        self.down()  # leftovers of an earlier run
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        self.made.append(("link", self.bridge))
        sh("ip", "addr", "add", f"10.{self.net}.0.1/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for n in self.nodes:
            ns, host, peer = self.ns(n), f"sc{self.net}n{n}", f"sc{self.net}n{n}p"
            sh("ip", "netns", "add", ns)
            self.made.append(("netns", ns))
            sh("ip", "link", "add", host, "type", "veth", "peer", "name", peer)
            sh("ip", "link", "set", peer, "netns", ns)
            sh("ip", "link", "set", host, "master", self.bridge)
            sh("ip", "link", "set", host, "up")
            for cmd in (("ip", "addr", "add", f"{self.ip(n)}/24", "dev", peer),
                        ("ip", "link", "set", peer, "up"), ("ip", "link", "set", "lo", "up")):
                sh("ip", "netns", "exec", ns, *cmd)
        return self

    def down(self):
        if not self.enabled:
            return
        for n in self.nodes:
            sh("ip", "netns", "del", self.ns(n), check=False)
        sh("ip", "link", "del", self.bridge, check=False)

    def drop(self, at, from_node=None, to_node=None):
        """In node `at`'s namespace: drop packets from `from_node` (INPUT) or to `to_node`
        (OUTPUT)."""
        if from_node is not None:
            sh("ip", "netns", "exec", self.ns(at), "iptables", "-A", "INPUT", "-s",
               self.ip(from_node), "-j", "DROP")
        if to_node is not None:
            sh("ip", "netns", "exec", self.ns(at), "iptables", "-A", "OUTPUT", "-d",
               self.ip(to_node), "-j", "DROP")

    def cut(self, a, b):
        """No packets between nodes `a` and `b`, either way."""
        self.drop(a, from_node=b, to_node=b)
        self.drop(b, from_node=a, to_node=a)

    def heal(self):
        if self.enabled:
            for n in self.nodes:
                sh("ip", "netns", "exec", self.ns(n), "iptables", "-F", check=False)


class Node:
    """One `strand serve` in node `n`'s namespace (or on loopback)."""

    def __init__(self, n, work, net, voters, config):
        self.n, self.net = n, net
        self.data_dir = os.path.join(work, f"node-{n}")
        self.host = net.ip(n)
        self.port = free_port() if not net.enabled else 9092
        self.bootstrap = f"{self.host}:{self.port}"
        self.config = config
        self.log_path = os.path.join(work, f"node-{n}.log")
        self.proc = None
        self.paused = False

    def start(self):
        conf = os.path.join(os.path.dirname(self.log_path), f"node-{self.n}.toml")
        with open(conf, "w") as f:
            for k, v in self.config.items():
                value = str(v).lower() if isinstance(v, bool) else (
                    f'"{v}"' if isinstance(v, str) else str(v))
                f.write(f'"{k}" = {value}\n')
        prefix = ["ip", "netns", "exec", self.net.ns(self.n)] if self.net.enabled else []
        args = prefix + [BINARY, "serve", "--listen", self.bootstrap, "--data-dir",
                         self.data_dir, "--cores", "1", "--config", conf]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self.paused = False
        until(f"node {self.n} listening", self.listening, limit_s=30)

    def listening(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"node {self.n} exited: {self.tail()}")
        try:
            socket.create_connection((self.host, self.port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        if self.alive():
            if self.paused:
                self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self):
        if self.alive() and self.paused:
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def stop(self):
        self.resume()
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill9()

    def tail(self, n=2000):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-n:]


class Cluster:
    def __init__(self, work, nodes=3, use_namespaces=True, config=None, net=77):
        self.work = work
        self.ids = tuple(range(1, nodes + 1))
        self.net = Net(self.ids, net=net, use_namespaces=use_namespaces)
        try:
            self.net.up()
        except subprocess.CalledProcessError as e:
            # (Root with `ip` and `iptables`, but no namespaces here: a container without
            # the capability, say.) Loopback, process faults only.
            print(f"network namespaces unavailable ({e.stderr.strip() or e}): "
                  "nodes on 127.0.0.1, process faults only", flush=True)
            self.net.down()
            self.net.enabled = False
        certs = os.path.join(work, "certs")
        shutil.rmtree(work, ignore_errors=True)  # a fresh cluster every run
        os.makedirs(work)
        sh(BINARY, "cluster", "certs", "--out", certs, "--nodes",
           ",".join(str(n) for n in self.ids))
        ports = {n: (9093 if self.net.enabled else free_port()) for n in self.ids}
        voters = ",".join(f"{n}@{self.net.ip(n)}:{ports[n]}" for n in self.ids)
        self.nodes = {}
        for n in self.ids:
            self.nodes[n] = Node(n, work, self.net, voters, {
                "node.id": n,
                "controller.quorum.voters": voters,
                "cluster.id": "chaos",
                "cluster.tls.ca.location": os.path.join(certs, "ca.pem"),
                "cluster.tls.certificate.location": os.path.join(certs, f"node-{n}.pem"),
                "cluster.tls.key.location": os.path.join(certs, f"node-{n}.key"),
                "default.replication.factor": min(3, nodes),
                "group.initial.rebalance.delay.ms": 0,
                # Short enough that a 4-10 s fault trips them (Kafka's names and meanings).
                "broker.session.timeout.ms": 3000,
                "broker.heartbeat.interval.ms": 500,
                "replica.lag.time.max.ms": 3000,
                **({} if self.net.enabled else {"admin.listen": f"127.0.0.1:{free_port()}"}),
                **(config or {}),
            })

    def bootstrap(self):
        return ",".join(node.bootstrap for node in self.nodes.values())

    def start(self):
        for node in self.nodes.values():
            node.start()
        return self

    def stop(self):
        for node in self.nodes.values():
            node.stop()
        self.net.heal()
        self.net.down()


class Faults:
    """Starts and heals one fault at a time on `cluster`, and logs each as an event."""

    def __init__(self, cluster, rng, log):
        self.c, self.rng, self.log = cluster, rng, log
        self.active = None
        self.flapping = None

    def possible(self, kinds):
        return [k for k in kinds if k in PROCESS_FAULTS or self.c.net.enabled]

    def start(self, kind):
        ids = list(self.c.ids)
        self.rng.shuffle(ids)
        net = self.c.net
        detail = {}
        if kind == "isolate":
            n = ids[0]
            for m in ids[1:]:
                net.cut(n, m)
            detail = {"node": n}
        elif kind == "split":
            minority, majority = ids[:len(ids) // 2], ids[len(ids) // 2:]
            for a in minority:
                for b in majority:
                    net.cut(a, b)
            detail = {"minority": minority, "majority": majority}
        elif kind == "bridge":
            middle, rest = ids[0], ids[1:]
            left, right = rest[:len(rest) // 2], rest[len(rest) // 2:]
            for a in left:
                for b in right:
                    net.cut(a, b)
            detail = {"bridge": middle, "left": left, "right": right}
        elif kind == "oneway":
            a, b = ids[0], ids[1]
            net.drop(b, from_node=a)
            detail = {"deaf": b, "to": a}
        elif kind == "flap":
            self.flapping = ids[0]
            detail = {"node": ids[0]}
        elif kind == "kill":
            self.c.nodes[ids[0]].kill9()
            detail = {"node": ids[0]}
        elif kind == "pause":
            self.c.nodes[ids[0]].pause()
            detail = {"node": ids[0]}
        elif kind == "restart":
            for n in ids:
                self.c.nodes[n].kill9()
            detail = {"nodes": ids}
        self.active = (kind, detail)
        self.log({"f": "fault", "type": "start", "fault": kind, **detail})

    def tick(self, step):
        """Called about every 0.5 s while a fault is active (flapping toggles each second)."""
        if self.flapping is None:
            return
        self.c.net.heal()
        if step % 4 < 2:
            for m in self.c.ids:
                if m != self.flapping:
                    self.c.net.cut(self.flapping, m)

    def heal(self):
        if self.active is None:
            return
        kind, detail = self.active
        self.flapping = None
        self.c.net.heal()
        for node in self.c.nodes.values():
            node.resume()
            if not node.alive():
                node.start()
        self.log({"f": "fault", "type": "heal", "fault": kind, **detail})
        self.active = None


def schedule(rng, kinds, seconds, fault_s=(4, 10), quiet_s=(3, 6)):
    """[(start offset s, kind, duration s)]: faults with quiet gaps, drawn from `rng`; every
    kind appears once (in a random order) before any repeats."""
    out, t, bag = [], rng.uniform(*quiet_s), []
    while True:
        if not bag:
            bag = list(kinds)
            rng.shuffle(bag)
        kind = bag.pop()
        d = rng.uniform(*fault_s)
        if t + d > seconds:
            return out
        out.append((round(t, 2), kind, round(d, 2)))
        t += d + rng.uniform(*quiet_s)


def seeded(seed):
    return random.Random(seed)


def wait_formed(cluster, limit_s=90):
    from confluent_kafka.admin import AdminClient

    def formed():
        md = AdminClient({"bootstrap.servers": cluster.bootstrap()}).list_topics(timeout=5)
        return sorted(md.brokers) == list(cluster.ids) and md.controller_id in cluster.ids

    until("every broker registered", formed, limit_s=limit_s)
    return time.time()
