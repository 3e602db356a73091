#!/usr/bin/env python3
"""The kvm level's QMP client: the one place the tests speak QEMU's monitor protocol.

  qmp.py SOCKET COMMAND [JSON-ARGUMENTS]      run one QMP command, print its answer as JSON
  qmp.py --guests DIR attach SYSTEM BLOCK SERIAL
  qmp.py --guests DIR detach SYSTEM BLOCK SERIAL

attach and detach are the test fabric's hot-plug (fake_redfish --hot-plug): the guest of
composed system SYSTEM is the one whose QMP socket is DIR/SYSTEM/qmp.sock (a system without a
guest has no host to plug into: nothing is done). attach puts an NVMe controller whose serial
is the drive's (the identity the fabric reports) into the first free pcie-root-port, backed by
a null block device of 1 GiB; detach asks for its removal (device_del: the guest's pciehp
presses the attention button and powers the slot off after its 5 s) and waits for QEMU's
DEVICE_DELETED, as a fabric's detach returns once the device is gone. Each step's time goes to
stderr ("qmp: attach FRN100000000: device_add 0.01 s"). Exits 1 with one line on failure.
"""
import json
import os
import socket
import sys
import time

DELETE_WAIT_S = float(os.environ.get("COMPOSER_QMP_DELETE_WAIT", "60"))


class Qmp:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(path)
        self.buf = b""
        self.events = []
        self._read()  # the greeting
        self.call("qmp_capabilities")

    def _read(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("QEMU closed the QMP socket")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, command, arguments=None):
        msg = {"execute": command}
        if arguments:
            msg["arguments"] = arguments
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            answer = self._read()
            if "event" in answer:
                self.events.append(answer)
                continue
            if "error" in answer:
                raise RuntimeError(f"{command}: {answer['error'].get('desc', answer['error'])}")
            return answer.get("return")

    def wait_event(self, name, device, timeout):
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events:
                if e["event"] == name and e.get("data", {}).get("device") == device:
                    return
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"no {name} for {device} within {timeout:.0f} s")
            self.sock.settimeout(left)
            try:
                answer = self._read()
            except socket.timeout:
                continue
            finally:
                self.sock.settimeout(30)
            if "event" in answer:
                self.events.append(answer)


def root_ports(q):
    """The pcie-root-ports by id, each with the devices behind it."""
    ports = {}
    for bus in q.call("query-pci"):
        for dev in bus["devices"]:
            bridge = dev.get("pci_bridge")
            if bridge is not None and dev.get("qdev_id"):
                ports[dev["qdev_id"]] = bridge.get("devices", [])
    return ports


def attach(q, serial):
    dev = f"nvme-{serial}"
    ports = root_ports(q)
    for port in sorted(ports):
        if any(d.get("qdev_id") == dev for d in ports[port]):
            return  # attached already: an attach asked again changes nothing
    free = [p for p in sorted(ports) if not ports[p]]
    if not free:
        raise RuntimeError(f"no free pcie-root-port for drive {serial} (ports: {sorted(ports)})")
    t0 = time.monotonic()
    q.call("blockdev-add", {"driver": "null-co", "node-name": f"blk-{serial}",
                            "size": 1 << 30, "read-zeroes": True})
    try:
        q.call("device_add", {"driver": "nvme", "id": dev, "serial": serial,
                              "drive": f"blk-{serial}", "bus": free[0]})
    except RuntimeError:
        q.call("blockdev-del", {"node-name": f"blk-{serial}"})
        raise
    print(f"qmp: attach {serial}: device_add into {free[0]} {time.monotonic() - t0:.2f} s",
          file=sys.stderr)


def detach(q, serial):
    dev = f"nvme-{serial}"
    ports = root_ports(q)
    if not any(d.get("qdev_id") == dev for devices in ports.values() for d in devices):
        return  # not plugged: nothing to take away
    t0 = time.monotonic()
    q.call("device_del", {"id": dev})
    q.wait_event("DEVICE_DELETED", dev, DELETE_WAIT_S)
    q.call("blockdev-del", {"node-name": f"blk-{serial}"})
    print(f"qmp: detach {serial}: device_del until DEVICE_DELETED {time.monotonic() - t0:.2f} s",
          file=sys.stderr)


def main(argv):
    try:
        if len(argv) == 6 and argv[0] == "--guests" and argv[2] in ("attach", "detach"):
            sock = os.path.join(argv[1], argv[3], "qmp.sock")
            if not os.path.exists(sock):
                return 0
            q = Qmp(sock)
            (attach if argv[2] == "attach" else detach)(q, argv[5])
            return 0
        if len(argv) in (2, 3) and not argv[0].startswith("-"):
            q = Qmp(argv[0])
            print(json.dumps(q.call(argv[1], json.loads(argv[2]) if len(argv) == 3 else None)))
            return 0
    except (OSError, RuntimeError, ValueError) as e:
        print(f"qmp: {' '.join(argv)}: {e}", file=sys.stderr)
        return 1
    print("usage: qmp.py SOCKET COMMAND [JSON-ARGUMENTS] | "
          "qmp.py --guests DIR attach|detach SYSTEM BLOCK SERIAL", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
