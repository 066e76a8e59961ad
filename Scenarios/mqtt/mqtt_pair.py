#!/usr/bin/env python3
"""A third-party MQTT pair for chaos's MQTT audit: PyPI `paho-mqtt` clients through a broker (Debian's `mosquitto`,
started by the scenario's `pair.server`), as their users configure them: reconnecting on their own after any loss of
the connection, with persistent sessions (clean session off) so that the broker keeps what a subscriber missed.

client --index N: clients 1..--publishers publish, the others subscribe.
- A publisher (client id pub-N) publishes {"type": "MSG", "stream": "fleet/N", "seq": k} to topic fleet/N, k = 1, 2,
  ... one every --interval seconds for --publish-for seconds (after --start-after seconds from its first connection), at --qos; paho queues what it publishes while
  disconnected and resends what was in flight when it reconnects. It logs each message the broker acknowledged
  (PUBACK at QoS 1, PUBCOMP at QoS 2; at QoS 0 when paho wrote it) as {"stream", "dir": "up", "seq"}.
- A subscriber (client id sub-N) subscribes to fleet/# at --qos and logs every PUBLISH paho hands it as
  {"stream": topic, "receiver": "sub-N", "dir": "down", "seq", "dup"}. --clean: a clean session (a bug for a
  subscriber that must not miss anything: the broker forgets it at each disconnect).
--retain: publishers publish retained messages, so the broker sends a subscriber the topic's last one again each time it
subscribes (after every reconnect); a subscriber logs "retained": true for a PUBLISH that came so.
--tls-ca CA: over TLS, trusting CA (chaos's, `chaos ca`) and checking the broker's name as paho does by default.
--websocket: over WebSocket (paho's transport "websockets", subprotocol mqtt, path /mqtt).
--mqtt5: MQTT 5.0 instead of 3.1.1 (a persistent session lasts an hour). Every client logs its connects and
disconnects with their reason codes ({"event": "disconnected", "reason": "Server shutting down"}), runs until SIGTERM
(the run's end) and logs one line per message, flushed.
"""
import argparse
import json
import signal
import sys
import threading
import time

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    client = sub.add_parser("client")
    client.add_argument("--connect", required=True)
    client.add_argument("--subscriber-connect", help="HOST:PORT subscribers connect to instead (a proxy of their own)")
    client.add_argument("--index", type=int, required=True)
    client.add_argument("--publishers", type=int, default=1)
    client.add_argument("--qos", type=int, default=1)
    client.add_argument("--interval", type=float, default=0.05)
    client.add_argument("--publish-for", type=float, default=8)
    client.add_argument("--start-after", type=float, default=1, help="seconds a publisher waits first (subscribers subscribe)")
    client.add_argument("--keepalive", type=int, default=2)
    client.add_argument("--clean", action="store_true")
    client.add_argument("--mqtt5", action="store_true",
                        help="MQTT 5.0 (its session lasts an hour unless --clean), not 3.1.1")
    client.add_argument("--retain", action="store_true", help="publish retained messages")
    client.add_argument("--tls-ca", help="MQTT over TLS, trusting this CA (PEM) and checking the broker's name")
    client.add_argument("--websocket", action="store_true", help="MQTT over WebSocket (subprotocol mqtt, path /mqtt)")
    client.add_argument("--log", required=True)
    args = parser.parse_args()
    publisher = args.index <= args.publishers
    host, port = (args.connect if publisher or not args.subscriber_connect else args.subscriber_connect).rsplit(":", 1)
    client_id = f"{'pub' if publisher else 'sub'}-{args.index}"
    log = open(args.log, "a", buffering=1)
    # Reentrant: paho may call on_publish from within publish(), on the publishing thread. Never held while calling
    # into paho (see the publish loop).
    lock = threading.RLock()

    def write(record):
        with lock:
            log.write(json.dumps(record) + "\n")

    transport = "websockets" if args.websocket else "tcp"
    if args.mqtt5:
        peer = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5, transport=transport)
        session = Properties(PacketTypes.CONNECT)
        session.SessionExpiryInterval = 0 if args.clean else 3600
        connect = {"clean_start": args.clean, "properties": session}
    else:
        peer = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=args.clean,
                           protocol=mqtt.MQTTv311, transport=transport)
        connect = {}
    if args.websocket:
        peer.ws_set_options(path="/mqtt")
    if args.tls_ca:
        peer.tls_set(ca_certs=args.tls_ca)
    peer.reconnect_delay_set(min_delay=0.2, max_delay=1)
    peer.max_inflight_messages_set(100)
    topic = f"fleet/{args.index}"
    pending = {}  # mid -> seq, until the broker acknowledges it
    early = set()  # mids acknowledged before publish() returned them

    connected = threading.Event()

    def on_connect(client, userdata, flags, reason, properties):
        write({"event": "connected", "session_present": bool(flags.session_present), "reason": str(reason)})
        connected.set()
        if not publisher:
            client.subscribe("fleet/#", qos=args.qos)

    def on_disconnect(client, userdata, flags, reason, properties):
        write({"event": "disconnected", "reason": str(reason)})

    def on_publish(client, userdata, mid, reason, properties):
        with lock:
            seq = pending.pop(mid, None)
            if seq is None:
                early.add(mid)
                return
            write({"stream": topic, "dir": "up", "seq": seq})

    def on_message(client, userdata, message):
        body = json.loads(message.payload)
        write({"stream": message.topic, "receiver": client_id, "dir": "down", "seq": body["seq"], "dup": bool(message.dup),
               "retained": bool(message.retain)})

    peer.on_connect = on_connect
    peer.on_disconnect = on_disconnect
    peer.on_publish = on_publish
    peer.on_message = on_message
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    peer.connect_async(host, int(port), keepalive=args.keepalive, **connect)
    peer.loop_start()
    if publisher:
        # The window counts from the first connection, as a scenario's faults do (ready: connected), not from the
        # process's start, which a loaded machine delays by seconds.
        while not stopping.is_set() and not connected.wait(0.1):
            pass
        stopping.wait(args.start_after)
        begin = time.monotonic()
        seq = 0
        while not stopping.is_set() and time.monotonic() - begin < args.publish_for:
            seq += 1
            payload = json.dumps({"type": "MSG", "stream": topic, "seq": seq})
            # Not under the lock: paho calls on_publish holding its own message lock, which publish() takes too (a
            # publisher holding ours while paho's network thread, holding paho's, waited for ours hung for good in a
            # fresh-clone run after 104 messages).
            info = peer.publish(topic, payload, qos=args.qos, retain=args.retain)
            with lock:
                if info.mid in early:
                    early.discard(info.mid)
                    write({"stream": topic, "dir": "up", "seq": seq})
                else:
                    pending[info.mid] = seq
            stopping.wait(args.interval)
    stopping.wait()
    peer.disconnect()
    peer.loop_stop()
    log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
