"""A CPython process holding typical application data, for `ztier corpus capture`.

Builds, with fixed seeds (run with PYTHONHASHSEED=0):
- a dict of 400,000 str -> str entries (session ids, URLs, e-mail addresses,
  hex tokens, short log messages), then deletes a random quarter of them,
  leaving dummy slots and freed holes in the allocator's pools;
- 120,000 JSON-like records: dicts mixing int, float, bool, None and str,
  a list of tags and a nested address;
- 1,200,000 ints of several kinds and 400,000 floats in lists;
- 1,200 bytes objects of 1-32 KiB: packed binary records, UTF-8 text, and
  random bytes standing in for already-compressed media.
Then prints "ready PID RSS_KiB" and sleeps until it is killed.
"""
import os
import random
import struct
import sys
import time

random.seed(20261201)
WORDS = ("alpha beta gamma delta error warning info debug request response "
         "user session token cache miss hit timeout retry connect close read "
         "write commit rollback index query table row column page memory swap "
         "compress store load evict idle writeback kernel device block").split()
DOMAINS = ["example.com", "example.org", "mail.example.net", "corp.example"]
CITIES = ["Lisbon", "Oslo", "Nairobi", "Osaka", "Lima", "Perth", "Quebec"]


def word():
    return random.choice(WORDS)


def message():
    return " ".join(word() for _ in range(random.randint(3, 12)))


def url():
    return "https://%s/%s/%s?id=%d" % (random.choice(DOMAINS), word(), word(),
                                       random.randrange(10**6))


def email():
    return "%s.%s%d@%s" % (word(), word(), random.randrange(1000),
                           random.choice(DOMAINS))


def token():
    return "%032x" % random.getrandbits(128)


MAKERS = [message, url, email, token]

table = {}
for i in range(400_000):
    key = "session:%08d:%s" % (i, token()[:8])
    table[key] = random.choice(MAKERS)()
for key in random.sample(list(table), len(table) // 4):
    del table[key]

records = []
for i in range(120_000):
    records.append({
        "id": i,
        "name": "%s %s" % (word().title(), word().title()),
        "score": random.random() * 100,
        "active": random.random() < 0.7,
        "parent": None if random.random() < 0.5 else random.randrange(i + 1),
        "tags": [word() for _ in range(random.randint(0, 5))],
        "address": {"city": random.choice(CITIES),
                    "zip": "%05d" % random.randrange(100000),
                    "street": "%d %s street" % (random.randrange(1, 999),
                                                word().title())},
    })

ints = []
for i in range(1_200_000):
    kind = i % 4
    if kind == 0:
        ints.append(random.randrange(100))            # small counters
    elif kind == 1:
        ints.append(random.getrandbits(31))           # ids
    elif kind == 2:
        ints.append(1_700_000_000 + random.randrange(10**8))  # timestamps
    else:
        ints.append(random.randrange(-10**6, 10**6))  # signed values
floats = [random.gauss(0, 1000) for _ in range(400_000)]

blobs = []
for i in range(1_200):
    size = random.randint(1, 32) * 1024
    kind = i % 3
    if kind == 0:
        n = size // 16
        blobs.append(b"".join(struct.pack("<IIQ", j, random.getrandbits(16),
                                          1_700_000_000 + j) for j in range(n)))
    elif kind == 1:
        text = []
        while sum(len(t) for t in text) < size:
            text.append(message() + "\n")
        blobs.append("".join(text).encode()[:size])
    else:
        blobs.append(os.urandom(size))

rss = 0
with open("/proc/self/status") as f:
    for line in f:
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
print("ready", os.getpid(), rss, flush=True)
while True:
    time.sleep(3600)
