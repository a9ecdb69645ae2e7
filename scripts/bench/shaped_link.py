#!/usr/bin/env python3
"""The measuring half of scripts/bench/shaped_link.sh (its usage and what it prints are there): data
parallel BERT on 2 hosts x 1 rank over a link shaped with tc, against 1 rank on one host, beside
scripts/bench/scaling_model.py's prediction for the link.

    shaped_link.py --build DIR --data SHARDS --links "10gbit:25 1gbit:25" --model small --batch 8
                   --warmup 3 --steps 10 --out DIR

Hosts are network namespaces (tests/e2e/hosts.py); each run is scripts/run_multi_node.sh --hostfile
(1n1g on node0 alone, 2n1g on both) with ranks of one thread, as users launch. A link setting is
RATE[:DELAY_US] in tc's syntax ("1gbit:25") or "bare": both hosts' links are shaped alike both ways
(tbf for the rate, netem for the delay where the kernel has it). For each setting the link is
measured too (one TCP stream's throughput node0 -> node1, and half the round trip of one byte),
and the model is asked twice: with the nominal rate and delay, and with what was measured.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SRC, "tests", "e2e"))
import hosts as hh  # noqa: E402

# One TCP peer for the link measurement: `serve PORT` on a host answers 1-byte pings and swallows a
# bulk stream; `probe ADDRESS PORT BYTES` on another measures both.
PEER = r'''
import socket, sys, time
if sys.argv[1] == "serve":
    srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", int(sys.argv[2]))); srv.listen(2)
    for _ in range(2):
        c, _ = srv.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            b = c.recv(1 << 20)
            if not b: break
            if len(b) == 1: c.sendall(b)
        c.close()
else:
    address, port, nbytes = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    s = socket.create_connection((address, port)); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for _ in range(2000):
        t = time.perf_counter(); s.sendall(b"x"); s.recv(1); rtts.append(time.perf_counter() - t)
    s.close()
    rtts.sort()
    s = socket.create_connection((address, port)); chunk = b"\0" * (1 << 20)
    t = time.perf_counter(); sent = 0
    while sent < nbytes:
        s.sendall(chunk); sent += len(chunk)
    s.shutdown(socket.SHUT_WR); s.recv(1); seconds = time.perf_counter() - t
    print(f"{rtts[len(rtts) // 2] / 2 * 1e6:.1f} {sent * 8 / seconds / 1e9:.3f}")
'''


def measure_link(hosts, port, nbytes):
    """(one-way µs, Gbit/s) of node0 -> node1: half the median round trip of 1 byte, one stream's rate."""
    server = subprocess.Popen(hosts.on("node1", sys.executable, "-c", PEER, "serve", port))
    try:
        time.sleep(0.5)
        r = subprocess.run(hosts.on("node0", sys.executable, "-c", PEER, "probe", hosts.addresses[1], port, nbytes),
                           capture_output=True, text=True, timeout=300)
        if r.returncode:
            sys.exit(f"shaped_link: the link measurement failed: {r.stderr[-500:]}")
        one_way, gbps = (float(x) for x in r.stdout.split())
        return one_way, gbps
    finally:
        server.wait(timeout=30)


def step_ms(log, warmup):
    """Median ms of the steps after the warm-up, from a run's log (the trainer's step lines)."""
    ms = [float(m.group(2)) for m in re.finditer(r"^step +(\d+)/\d+ \|.*?\| ([\d.]+) ms \|", log, re.M)
          if int(m.group(1)) > warmup]
    if not ms:
        sys.exit(f"shaped_link: no timed steps in the log:\n{log[-1500:]}")
    return statistics.median(ms), ms


def train(hosts, a, case, name):
    """run_multi_node.sh --cases CASE on the hosts; (median ms, the timed steps' ms, the run's log)."""
    logs = os.path.join(a.out, name)
    command = hosts.on("node0", os.path.join(SRC, "scripts", "run_multi_node.sh"), "--hostfile", hosts.hostfile,
                       "--data", a.data, "--model", "bert", "--model-size", a.model, "--batch-size", a.batch,
                       "--steps", a.warmup + a.steps, "--runs", 1, "--device", "cpu", "--threads", 1, "--cases", case,
                       "--log-root", logs, "--build-dir", a.build, "--mpi-args", " ".join(map(str, hosts.mca())))
    r = hosts.run(command, timeout=3600)
    path = [os.path.join(d, f) for d, _, fs in os.walk(logs) for f in fs if f == "run1.log"][0]
    log = open(path).read()
    median, ms = step_ms(log, a.warmup)
    print(f"  {case} on {name}: {median:.0f} ms/step (steps {a.warmup + 1}-{a.warmup + a.steps}: "
          f"{', '.join(f'{x:.0f}' for x in ms)})", file=sys.stderr, flush=True)
    return median, ms, log


def model_of(log, predictions):
    """scaling_model.py's --link-bert (layers, hidden, vocabulary, sequence, predictions) and the
    parameter count, from the trainer's config and model lines."""
    config = json.loads(re.search(r"^config: (\{.*\})$", log, re.M | re.I).group(1))
    vocab = int(re.search(r"\bvocab (\d+)", log).group(1))
    bert = f"{config['layers']},{config['hidden']},{vocab},{config['seq_len']},{predictions}"
    return bert, config["parameters"]


def predict(a, one_rank_ms, gbps, latency_us, efficiency):
    out = os.path.join(a.out, "model.json")
    subprocess.run([sys.executable, os.path.join(SRC, "scripts", "bench", "scaling_model.py"), "--link-bert",
                    a.bert, "--link-batch", str(a.batch), "--link-step-ms", str(one_rank_ms), "--ib-gbps", str(gbps),
                    "--ib-latency-us", str(latency_us), "--ib-efficiency", str(efficiency), "--json", out],
                   check=True, stdout=subprocess.DEVNULL)
    return json.load(open(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--links", default="10gbit:25 1gbit:25")
    ap.add_argument("--model", default="small")
    ap.add_argument("--predictions", type=int, default=20, help="the shards' masked predictions per sequence (20)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--efficiency", type=float, default=0.94,
                    help="share of the line rate TCP carries (1448 payload bytes per 1538 on the wire: 0.94)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    a.out, a.data = os.path.abspath(a.out), os.path.abspath(a.data)
    shared = [p for p in (a.out, a.data) if p.startswith("/tmp/") and not p.startswith(a.out + "/")]
    try:
        hosts = hh.Hosts(2, slots=1, shared=list(dict.fromkeys(shared)))
    except hh.Unavailable as e:
        sys.exit(f"shaped_link: cannot make 2 hosts as network namespaces: {e}")
    rows = []
    with hosts:
        netem = hosts.has_netem()
        _, before, log = train(hosts, a, "1n1g", "one-host")
        a.bert, trainer_parameters = model_of(log, a.predictions)
        for k, setting in enumerate(a.links.split()):
            rate, _, asked = setting.partition(":")
            rate = None if rate == "bare" else rate
            delay = float(asked) if asked and netem else 0.0
            for host in hosts.names:
                hosts.unshape(host)
                hosts.shape(host, rate=rate, delay_us=delay or None)
            big = 1 << 28 if rate and hh._bits(rate) < 5e9 else 1 << 30
            one_way, gbps = measure_link(hosts, 5001 + k, big)
            two, two_steps, _ = train(hosts, a, "2n1g", f"link-{k}")
            rows.append(dict(setting=setting, rate=rate, delay_us=delay, delay_asked=asked, measured_gbps=gbps,
                             one_way_us=one_way, two_hosts_ms=two, two_hosts_steps=two_steps))
            for host in hosts.names:
                hosts.unshape(host)
        _, after, _ = train(hosts, a, "1n1g", "one-host-again")
    one = statistics.median(before + after)  # one rank's step, before and after the 2-host runs
    for r in rows:
        nominal_gbps = hh._bits(r["rate"]) / 1e9 if r["rate"] else r["measured_gbps"] / a.efficiency
        r["model"] = predict(a, one, nominal_gbps, r["delay_us"] or r["one_way_us"], a.efficiency)
        r["model_measured_link"] = predict(a, one, r["measured_gbps"], r["one_way_us"], 1.0)
    result = dict(date=time.strftime("%Y-%m-%d"), load=open("/proc/loadavg").read().split()[:3], netem=netem,
                  model=a.model, bert=a.bert, batch=a.batch, warmup=a.warmup, steps=a.steps, one_rank_ms=one,
                  one_rank_steps=before + after, trainer_parameters=trainer_parameters,
                  model_parameters=rows[0]["model"]["parameters"] if rows else None, rows=rows)
    json.dump(result, open(os.path.join(a.out, "shaped_link.json"), "w"), indent=1)
    print_table(result, a)


def print_table(result, a):
    print(f"BERT {a.model} ({result['bert']}: layers, hidden, vocabulary, seq, predictions; "
          f"{result['trainer_parameters'] / 1e6:.1f}M parameters by the trainer, "
          f"{result['model_parameters'] / 1e6:.1f}M by the model), batch {a.batch} per rank, ranks of 1 thread; "
          f"median of steps {a.warmup + 1}-{a.warmup + a.steps}; one host: {result['one_rank_ms']:.0f} ms a step "
          f"(runs before and after the 2-host ones); load average {' '.join(result['load'])}")
    if not result["netem"]:
        print("This kernel has no tc netem: no delay is added (the links' rates are shaped with tbf); the model gets "
              "the measured one-way latency.")
    print("| link (tc, both hosts) | one TCP stream | one-way latency | 2 hosts ms/step | speedup (2 hosts / 1) | "
          "model ms/step | speedup | measured / model | model on the measured link | measured / model |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in result["rows"]:
        link = "bare veth" if not r["rate"] else r["rate"].replace("gbit", " Gbit/s").replace("mbit", " Mbit/s")
        if r["delay_us"]:
            link += f", {r['delay_us']:g} µs"
        elif r["delay_asked"]:
            link += f" ({r['delay_asked']} µs asked, no netem)"
        m, mm = r["model"], r["model_measured_link"]
        speedup = 2 * result["one_rank_ms"] / r["two_hosts_ms"]
        print(f"| {link} | {r['measured_gbps']:.2f} Gbit/s | {r['one_way_us']:.0f} µs | {r['two_hosts_ms']:.0f} | "
              f"{speedup:.2f}x | {m['step_ms']:.0f} | {m['speedup']:.2f}x | {r['two_hosts_ms'] / m['step_ms']:.2f} | "
              f"{mm['step_ms']:.0f} | {r['two_hosts_ms'] / mm['step_ms']:.2f} |")


if __name__ == "__main__":
    main()
