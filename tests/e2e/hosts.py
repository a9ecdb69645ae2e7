"""Real hosts on one machine, for the e2e tests of jobs that mpirun spreads over several hosts:
each host is a network namespace with its own hostname, /etc/hosts and /tmp; the hosts are joined
by a switch (a bridge in a namespace of its own) and talk TCP over it, with addresses in
198.18.0.0/15 (RFC 2544's range for network benchmarks). Nothing is routed anywhere else: a host's
namespace holds only its loopback and its link to the switch, and the machine's own namespace gets
no interface, address or route.

    with Hosts(3, shared=[tmp]) as hosts:           # skips the test (exit 77) where it cannot
        hosts.run(hosts.mpirun(3, tool, ...))        # mpirun runs on node0, the "head"
        hosts.run(hosts.on("node2", "hostname"))     # a command on one host

- mpirun runs on the first host (node0), as a user's does on a head node that also computes: its
  ranks there are its own children, the other hosts' come through the launcher agent. Running it
  in the machine's own namespace instead would need an address and a route there, a way out of
  the harness's network.
- The launcher agent (`agent`, mpirun's `--mca plm_rsh_agent`) is called as ssh would be,
  `agent [options] HOST COMMAND…`, and runs the command line through a shell on that host with the
  clean environment a login gives (PATH and HOME): what a rank needs must come through mpirun,
  as on a real cluster. `enter HOST COMMAND…` runs a command on a host keeping the caller's
  environment (the head's mpirun).
- Each host has its own hostname (a UTS namespace): OpenMPI tells nodes apart by the names their
  daemons report, and with one name everywhere it merges them (measured: OpenMPI 4.1.4 then
  crashes in its first collective). The hostfile names the hosts; they resolve through the
  harness's hosts file, mounted over /etc/hosts inside the hosts only.
- Each host has a /tmp of its own (its node-local temporary files), but for the `shared` paths
  under /tmp, which every host sees at the same path (the shared file system a cluster's jobs
  write their outputs to). Everything outside /tmp is shared. local_files() lists what was left
  in each host's /tmp.
- PRETRAIN_HOSTS_READONLY (paths separated by ':') in mpirun's environment mounts those paths
  read-only on every host the agent starts processes on, i.e. all but node0: a job's rank on
  another host that writes there fails.
- mca() is mpirun's flags for these hosts: the agent, TCP between all ranks (btl tcp,self, also
  between two ranks of one host), mpirun's and its daemons' own channel (oob) on the hosts'
  network only. mpi_env() is mpirun's environment (root allowed, no loopback-only settings).
- Teardown always runs (the context manager, atexit, SIGTERM): every process still in a host is
  killed, the namespaces deleted (their links go with them), the directory removed. Names carry
  the test's pid (pretrain-hosts-<pid>-<k>-…); the namespaces and directories of a test that was
  killed with SIGKILL are removed by the next Hosts() made on the machine.

Needs root, iproute2 (ip) and util-linux (unshare, mount); where a namespace, link or mount cannot
be made, Hosts() skips the test naming the command that failed."""
import atexit
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

PREFIX = "pretrain-hosts"
SUBNET = "198.18.0.0/24"  # each harness has its own switch, so every harness can use the same addresses
NETS = "198.18.0.0/15"    # what the MPI channels may use: nothing outside the benchmark range
LOGIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_made = 0  # Hosts made by this process, for unique names


class Unavailable(Exception):
    """The machine cannot make the hosts (not root, no iproute2, namespaces refused)."""


def _sh(*args, check=True):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise Unavailable(f"`{' '.join(map(str, args))}` failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()}")
    return r


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _kill_in(ns):
    """SIGKILL every process in a network namespace (the harness's own: what its jobs left)."""
    for _ in range(50):
        pids = [int(p) for p in _sh("ip", "netns", "pids", ns, check=False).stdout.split()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


def _delete_netns(ns):
    _kill_in(ns)
    _sh("ip", "netns", "delete", ns, check=False)


def remove_leftovers():
    """The namespaces and directories of harnesses whose process is gone (killed with SIGKILL, so
    that their teardown never ran)."""
    names = [line.split()[0] for line in _sh("ip", "netns", "list", check=False).stdout.splitlines() if line.strip()]
    for ns in names:
        m = re.match(rf"{PREFIX}-(\d+)-", ns)
        if m and not _alive(int(m.group(1))):
            _delete_netns(ns)
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        m = re.match(rf"{PREFIX}-(\d+)-", name)
        if m and not _alive(int(m.group(1))):
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)


def _bits(rate):
    """Bits per second of a tc rate such as '10gbit', '100mbit', '1.5gbit'."""
    m = re.fullmatch(r"([0-9.]+)([kmg]?)bit", rate.lower())
    if not m:
        raise ValueError(f"rate {rate!r}: expected NUMBER[k|m|g]bit")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


def _under_tmp(path):
    return os.path.commonpath(["/tmp", os.path.realpath(path)]) == "/tmp"


class Hosts:
    """count hosts named node0…node<count-1> at 198.18.0.1…, `slots` MPI slots each in the
    hostfile; `shared`: directories under /tmp every host sees (the test's working directory)."""

    def __init__(self, count, slots=2, shared=()):
        global _made
        if os.geteuid() != 0:
            raise Unavailable("network namespaces need root")
        for tool in ("ip", "unshare", "mount", "mpirun"):
            if not shutil.which(tool):
                raise Unavailable(f"{tool} not found (iproute2, util-linux, openmpi-bin)")
        remove_leftovers()
        self.count, self.slots = count, slots
        self.names = [f"node{i}" for i in range(count)]
        self.addresses = [f"198.18.0.{i + 1}" for i in range(count)]
        self.tag = f"{PREFIX}-{os.getpid()}-{_made}"
        _made += 1
        self.switch = f"{self.tag}-switch"
        self.namespaces = [f"{self.tag}-{n}" for n in self.names]
        self.dir = tempfile.mkdtemp(prefix=f"{self.tag}-")
        # The source tree and the build (the tools the hosts run) are seen by every host too: a
        # clone under /tmp would otherwise be behind each host's own /tmp.
        tree = [os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                os.environ.get("PRETRAIN_BUILD_DIR", "")]
        self.shared = list(dict.fromkeys(os.path.realpath(p) for p in (self.dir, *shared, *filter(None, tree))))
        self.closed = False
        atexit.register(self.close)
        self._previous_sigterm = signal.signal(signal.SIGTERM, self._terminated)
        try:
            self._make_network()
            self._write_files()
            self._check()
        except BaseException:
            self.close()
            raise

    # ---------------------------------------------------------------- setting up
    def _make_network(self):
        _sh("ip", "netns", "add", self.switch)
        _sh("ip", "-n", self.switch, "link", "add", "switch", "type", "bridge")
        _sh("ip", "-n", self.switch, "link", "set", "switch", "up")
        for name, ns, address in zip(self.names, self.namespaces, self.addresses):
            _sh("ip", "netns", "add", ns)
            # Both ends made inside the namespaces: no name ever appears in the machine's own.
            _sh("ip", "link", "add", name, "netns", self.switch, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _sh("ip", "-n", self.switch, "link", "set", name, "master", "switch")
            _sh("ip", "-n", self.switch, "link", "set", name, "up")
            _sh("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            _sh("ip", "-n", ns, "link", "set", "eth0", "up")
            _sh("ip", "-n", ns, "link", "set", "lo", "up")

    def _write_files(self):
        self.hosts_file = os.path.join(self.dir, "hosts")
        with open(self.hosts_file, "w") as f:
            f.write("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")
            f.writelines(f"{a} {n}\n" for a, n in zip(self.addresses, self.names))
        self.hostfile = self.hostfile_of(self.count, self.slots)
        for name in self.names:
            os.makedirs(self.local_tmp(name), exist_ok=True)
        # enter HOST COMMAND…: the host's namespace, hostname, /etc/hosts and /tmp (with the shared
        # paths mounted back at their own paths), then the read-only paths the agent passes.
        cases = "".join(f"  {n}|{a}) ns={shlex.quote(ns)} name={n} ;;\n"
                        for n, a, ns in zip(self.names, self.addresses, self.namespaces))
        binds = "".join(
            f'mkdir -p "$T"{shlex.quote(p[4:])} && mount --bind {shlex.quote(p)} "$T"{shlex.quote(p[4:])} && '
            for p in self.shared if _under_tmp(p))
        inside = (f'hostname "$name" && mount --bind {shlex.quote(self.hosts_file)} /etc/hosts && '
                  f'T={shlex.quote(self.dir)}/"$name"/tmp && {binds}mount --rbind "$T" /tmp && '
                  'IFS=: && for p in $HOSTS_READONLY; do mount --bind "$p" "$p" && mount -o remount,bind,ro "$p" || exit 255; done && '
                  'unset IFS HOSTS_READONLY name ns T TMPDIR && { cd "$PWD" 2>/dev/null || cd /; } && exec "$@"')
        self.enter = os.path.join(self.dir, "enter")
        with open(self.enter, "w") as f:
            f.write("#!/bin/bash\n"
                    "# enter HOST COMMAND...: runs COMMAND on one of this harness's hosts (tests/e2e/hosts.py)\n"
                    "case $1 in\n" + cases +
                    f'  *) echo "enter: no host \'$1\' here (hosts: {" ".join(self.names)})" >&2; exit 255 ;;\n'
                    "esac\nshift\n"
                    f"export name ns\nexec ip netns exec \"$ns\" unshare --uts -- bash -c {shlex.quote(inside)} bash \"$@\"\n")
        self.agent = os.path.join(self.dir, "agent")
        with open(self.agent, "w") as f:
            f.write("#!/bin/bash\n"
                    "# mpirun's launcher for this harness's hosts (--mca plm_rsh_agent), called as ssh:\n"
                    "# agent [options] HOST COMMAND...; the command line runs in a shell on HOST with a login's\n"
                    "# environment. PRETRAIN_HOSTS_READONLY: paths mounted read-only there.\n"
                    'while [[ $1 == -* ]]; do shift; done\n'
                    'host=$1; shift\n'
                    f'exec env -i PATH={LOGIN_PATH} HOME="$HOME" LANG=C.UTF-8 HOSTS_READONLY="${{PRETRAIN_HOSTS_READONLY:-}}" '
                    f'{shlex.quote(self.enter)} "$host" bash -c "$*"\n')
        for script in (self.enter, self.agent):
            os.chmod(script, 0o755)

    def _check(self):
        """Every host: its name, and the last host reached from the first over the switch."""
        for name in self.names:
            r = subprocess.run([self.agent, name, "hostname"], capture_output=True, text=True, timeout=30)
            if r.returncode != 0 or r.stdout.strip() != name:
                raise Unavailable(f"cannot enter host {name} (exit {r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
        probe = ("import socket; s = socket.create_connection((%r, 9), timeout=5)" % self.addresses[-1])
        r = subprocess.run([self.enter, self.names[0], sys.executable, "-c", probe], capture_output=True, text=True, timeout=30)
        # Nothing listens on port 9: a refusal proves the path (a reset from the other host); a
        # timeout or "unreachable" does not.
        if "ConnectionRefusedError" not in r.stderr and self.count > 1:
            raise Unavailable(f"{self.names[0]} cannot reach {self.names[-1]} over the switch: {r.stderr.strip()[-300:]}")

    # ---------------------------------------------------------------- using
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def hostfile_of(self, count, slots):
        """A hostfile of the first `count` hosts, `slots` each."""
        path = os.path.join(self.dir, f"hostfile-{count}x{slots}")
        with open(path, "w") as f:
            f.writelines(f"{n} slots={slots}\n" for n in self.names[:count])
        return path

    def mca(self):
        """mpirun's flags for these hosts: the agent, and TCP on the hosts' network only. The hosts
        share this machine's cores, which OpenMPI cannot know (each host's slots look free): a
        rank waiting for a message must yield its core rather than spin, or the rank it waits for
        cannot run (measured: BERT tiny at tensor 2 × pipeline 2 on 2 hosts × 2 ranks, 2 cores,
        3,063 ms a step spinning, 261 ms yielding)."""
        return ["--mca", "plm_rsh_agent", self.agent, "--mca", "btl", "tcp,self",
                "--mca", "btl_tcp_if_include", NETS, "--mca", "oob_tcp_if_include", NETS,
                "--mca", "mpi_yield_when_idle", "1"]

    def on(self, host, *command):
        """A command line that runs `command` on host (a name), in the caller's environment."""
        return [self.enter, host, *map(str, command)]

    def mpirun(self, np, *args, hosts=None, per_host=None):
        """mpirun of args on np ranks over the first `hosts` hosts (default all), run on node0;
        per_host: that many ranks on each host (-npernode), else by slot (--map-by node when np
        is at most the hosts)."""
        hosts = hosts or self.count
        placing = ["-npernode", per_host] if per_host else ["--map-by", "node"] if np <= hosts else []
        return self.on(self.names[0], "mpirun", "--hostfile", self.hostfile_of(hosts, self.slots), "-np", np,
                       *placing, *self.mca(), *args)

    def mpi_env(self, **extra):
        """The environment of a command that runs mpirun on these hosts: the caller's, as root may
        run mpirun, without the loopback-only MCA settings the one-host tests use."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_MCA_")}
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def run(self, args, rc=0, timeout=300, env=None):
        """Runs a command line (from mpirun() or on()) in mpi_env() plus env; output as text. The
        test fails when it runs past timeout (then every process on every host is killed) or,
        unless rc is None, when it succeeds where rc says it fails or the other way round."""
        args = [str(a) for a in args]
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                             env=self.mpi_env(**(env or {})), start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            self.kill_all()  # what mpirun's daemons started on the other hosts, outside its session
            out, err = p.communicate()
            cu.fail(f"hung ({timeout} s): {' '.join(args)}\n{out[-1500:]}{err[-1500:]}")
        r = subprocess.CompletedProcess(args, p.returncode, out, err)
        if rc is not None and (rc == 0) != (r.returncode == 0):
            cu.fail(f"exit {r.returncode}, expected {'success' if rc == 0 else 'a failure'}: {' '.join(args)}\n"
                    f"{out[-3000:]}{err[-3000:]}")
        return r

    def kill_all(self):
        """SIGKILL every process on every host."""
        for ns in self.namespaces:
            _kill_in(ns)

    def local_tmp(self, host):
        """Where host's /tmp is, seen from the machine."""
        return os.path.join(self.dir, host, "tmp")

    def local_files(self):
        """{host: files in its /tmp}, but the mount points of the shared paths."""
        found = {}
        for name in self.names:
            root = self.local_tmp(name)
            mounts = {os.path.join(root, p[5:]) for p in self.shared if _under_tmp(p)}
            keep = set()
            for m in mounts:  # the directories leading to a mount point are the harness's
                while m.startswith(root + "/"):
                    keep.add(m)
                    m = os.path.dirname(m)
            files = []
            for d, dirs, names in os.walk(root):
                dirs[:] = [x for x in dirs if os.path.join(d, x) not in mounts]
                files += [os.path.relpath(os.path.join(d, n), root) for n in names]
                files += [os.path.relpath(os.path.join(d, x), root) + "/" for x in dirs
                          if os.path.join(d, x) not in keep and not os.listdir(os.path.join(d, x))]
            found[name] = sorted(files)
        return found

    # ---------------------------------------------------------------- faults and shaped links
    # For scripts/chaos.py's net faults and scripts/bench/shaped_link.sh. A host's link is the veth
    # pair between its eth0 and its port on the switch (named as the host); what is set on it goes
    # with the namespaces at close().
    def namespace(self, host):
        return self.namespaces[self.names.index(host)]

    def set_link(self, host, up):
        """The host's own interface up or down (`ip link set eth0 down` on it): the host knows its
        link is gone (its routes go), its peers hear nothing."""
        _sh("ip", "-n", self.namespace(host), "link", "set", "eth0", "up" if up else "down")

    def kill_host(self, host):
        """SIGKILL every process on the host (`ip netns pids`), as a machine that dies: its kernel
        closes their connections, so the peers see them reset. Returns how many were killed."""
        pids = _sh("ip", "netns", "pids", self.namespace(host), check=False).stdout.split()
        _kill_in(self.namespace(host))
        return len(pids)

    def has_netem(self):
        """Whether the kernel has tc's netem (loss, delay): some lack it (CONFIG_NET_SCH_NETEM unset)."""
        if not hasattr(self, "_netem"):
            ns = self.namespace(self.names[0])
            self._netem = _sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay",
                              "1us", check=False).returncode == 0
            _sh("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "lo", "root", check=False)
        return self._netem

    def _link_ends(self, host):
        """(namespace, device) of both ends of host's link: its eth0, and its port on the switch."""
        return [(self.namespace(host), "eth0"), (self.switch, host)]

    def set_loss(self, host, lost):
        """100% loss between host and the switch, both ways, while every interface stays up (the
        host and its peers hear nothing, as behind a failed switch): `tc netem loss 100%` on both
        ends of its link, or where the kernel has no netem, the switch's port to the host disabled
        (`bridge link set … state 0`: it forwards nothing either way). Returns the method's name."""
        if self.has_netem():
            for ns, dev in self._link_ends(host):
                tc = ["ip", "netns", "exec", ns, "tc", "qdisc"]
                if lost:
                    _sh(*tc, "replace", "dev", dev, "root", "netem", "loss", "100%")
                else:
                    _sh(*tc, "del", "dev", dev, "root", check=False)
            return "tc netem loss 100%"
        _sh("bridge", "-n", self.switch, "link", "set", "dev", host, "state", "0" if lost else "3")
        return "switch port disabled (no netem in this kernel)"

    def shape(self, host, rate=None, delay_us=None):
        """Shapes host's link both ways (the egress of its eth0 and of its switch port): rate in
        tc's syntax ('10gbit'), and delay_us, half of it at each end, so that between two hosts
        shaped alike a packet is delayed delay_us one way (it leaves through one host's eth0 and
        enters the other through its switch port). With netem: `netem delay … rate …`; without it
        (some kernels lack it), a token bucket (tbf) for the rate, and a delay raises Unavailable:
        nothing else in tc delays a packet."""
        if delay_us and not self.has_netem():
            raise Unavailable("tc netem is not in this kernel (CONFIG_NET_SCH_NETEM): no delay can be added")
        for ns, dev in self._link_ends(host):
            if self.has_netem() and (delay_us or rate):
                qdisc = ["netem", *(["delay", f"{delay_us / 2:g}us"] if delay_us else []),
                         *(["rate", rate] if rate else [])]
            elif rate:
                bits = _bits(rate)
                # The bucket: 200 µs of the rate, at least a 64 KiB GSO packet (tbf splits bigger ones).
                burst = max(65536 + 1514, int(bits / 8 * 200e-6))
                qdisc = ["tbf", "rate", rate, "burst", str(burst), "latency", "100ms"]
            else:
                continue
            _sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", *qdisc)

    def unshape(self, host):
        """Back to the bare link (no qdisc set by shape() or set_loss())."""
        for ns, dev in self._link_ends(host):
            _sh("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root", check=False)

    def close(self):
        if self.closed:
            return
        self.closed = True
        for ns in [*self.namespaces, self.switch]:
            _delete_netns(ns)
        shutil.rmtree(self.dir, ignore_errors=True)
        if signal.getsignal(signal.SIGTERM) == self._terminated:
            signal.signal(signal.SIGTERM, self._previous_sigterm)

    def _terminated(self, signum, frame):
        self.close()
        raise SystemExit(128 + signum)


def hosts_or_skip(count, **kwargs):
    """Hosts(count, …), or the test skipped (exit 77) saying why they cannot be made here."""
    try:
        return Hosts(count, **kwargs)
    except Unavailable as e:
        cu.skip(f"cannot make {count} hosts as network namespaces: {e}")
