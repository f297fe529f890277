#!/usr/bin/env python3
"""Builds tests/data/valid_small.gguf from the real SmolLM2 header and tests/data/malformed/*.gguf,
one file per corrupted field, for the `inspect` error-path tests (tests/malformed_gguf.cmake).

The valid base keeps the real metadata (tokenizer arrays trimmed so files stay small) and three real
tensor infos (Q8_0, F32, Q4_1) shrunk to two rows, with their first bytes of real data laid out
again at aligned offsets. Every malformed file must make `agentkv inspect` fail with one error line.
Stdlib only. Usage: scripts/make_malformed_ggufs.py [MODEL.gguf] [OUT_DIR=tests/data]
"""
import os
import struct
import sys

DEFAULT_MODEL = os.path.expanduser("~/.cache/agentkv/models/SmolLM2-135M-Instruct.Q4_1.gguf")
KEEP_ARRAY_ITEMS = 400  # per tokenizer array; keeps the base file near 16 KB
# name -> rows kept (ne[1]); these exist in the SmolLM2 file with types Q8_0, F32, Q4_1.
TENSORS = [("token_embd.weight", 2), ("blk.0.attn_norm.weight", None), ("blk.0.attn_k.weight", 2)]
BLOCK = {0: (1, 4), 3: (32, 20), 8: (32, 34)}  # ggml type id -> (block elems, block bytes)
SCALAR_FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<B", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY, U32 = 8, 9, 4


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.d[self.p:self.p + n]
        self.p += n
        return s

    def value(self, t):
        if t == STRING:
            return self.string()
        if t == ARRAY:
            et, n = self.take("<I"), self.take("<Q")
            return (et, [self.value(et) for _ in range(n)])
        return self.take(SCALAR_FMT[t])


def read_model(path):
    with open(path, "rb") as f:
        head = f.read(4 << 20)
    r = Reader(head)
    assert r.take("<I") == 0x46554747 and r.take("<I") == 3, "not a GGUF v3 file"
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    kvs = []
    for _ in range(n_kv):
        key = r.string().decode()
        t = r.take("<I")
        kvs.append((key, t, r.value(t)))
    infos = {}
    for _ in range(n_tensors):
        name = r.string().decode()
        nd = r.take("<I")
        ne = [r.take("<Q") for _ in range(nd)]
        infos[name] = (ne, r.take("<I"), r.take("<Q"))
    data_start = (r.p + 31) // 32 * 32
    return kvs, infos, path, data_start


class Writer:
    """Encodes a GGUF file and records where each field starts, so corruptions hit exact bytes."""

    def __init__(self):
        self.b = bytearray()
        self.at = {}

    def put(self, fmt, v, label=None):
        if label:
            self.at[label] = len(self.b)
        self.b += struct.pack(fmt, v)

    def string(self, s, label=None):
        s = s.encode() if isinstance(s, str) else s
        self.put("<Q", len(s), label)
        self.b += s

    def value(self, t, v, label):
        if t == STRING:
            self.string(v, label + ":strlen")
        elif t == ARRAY:
            et, items = v
            self.put("<I", et, label + ":elemtype")
            self.put("<Q", len(items), label + ":count")
            for k, item in enumerate(items):
                self.value(et, item, "%s[%d]" % (label, k))
        else:
            self.put(SCALAR_FMT[t], v, label + ":value")


def build(kvs, tensors, alignment=32, n_kv=None, n_tensors=None):
    """tensors: list of (name, ne, type, data). Returns (bytes, field offsets)."""
    w = Writer()
    w.put("<I", 0x46554747, "magic")
    w.put("<I", 3, "version")
    w.put("<Q", len(tensors) if n_tensors is None else n_tensors, "tensor_count")
    w.put("<Q", len(kvs) if n_kv is None else n_kv, "kv_count")
    w.at["kvs"] = len(w.b)
    for key, t, v in kvs:
        w.string(key, "kv:%s:keylen" % key)
        w.put("<I", t, "kv:%s:type" % key)
        w.value(t, v, "kv:" + key)
    w.at["tensor_infos"] = len(w.b)
    offset = 0
    for name, ne, t, data in tensors:
        w.string(name, "t:%s:namelen" % name)
        w.put("<I", len(ne), "t:%s:ndims" % name)
        for d, n in enumerate(ne):
            w.put("<Q", n, "t:%s:ne%d" % (name, d))
        w.put("<I", t, "t:%s:type" % name)
        w.put("<Q", offset, "t:%s:offset" % name)
        offset = (offset + len(data) + alignment - 1) // alignment * alignment
    w.at["infos_end"] = len(w.b)
    w.b += bytes(-len(w.b) % alignment)
    w.at["data"] = len(w.b)
    for k, (_, _, _, data) in enumerate(tensors):
        w.b += data
        if k + 1 < len(tensors):  # no padding after the last tensor: every cut then loses data
            w.b += bytes(-len(w.b) % alignment)
    return w.b, w.at


def base_inputs(model_path):
    kvs, infos, path, data_start = read_model(model_path)
    trimmed = []
    for key, t, v in kvs:
        if t == ARRAY and len(v[1]) > KEEP_ARRAY_ITEMS:
            v = (v[0], v[1][:KEEP_ARRAY_ITEMS])
        trimmed.append((key, t, v))
    tensors = []
    with open(path, "rb") as f:
        for name, rows in TENSORS:
            ne, t, off = infos[name]
            ne = [ne[0], rows] if rows else list(ne)
            elems, nbytes = BLOCK[t]
            size = ne[0] // elems * nbytes * (ne[1] if len(ne) > 1 else 1)
            f.seek(data_start + off)
            tensors.append((name, ne, t, f.read(size)))
    return trimmed, tensors


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_MODEL
    out_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "tests", "data")
    kvs, tensors = base_inputs(model)
    base, at = build(kvs, tensors)
    os.makedirs(os.path.join(out_dir, "malformed"), exist_ok=True)
    with open(os.path.join(out_dir, "valid_small.gguf"), "wb") as f:
        f.write(base)

    files = {}

    def patch(name, label, fmt, value):
        b = bytearray(base)
        struct.pack_into(fmt, b, at[label], value)
        files[name] = b

    emb, norm, attn_k = (t[0] for t in tensors)
    patch("magic", "magic", "<I", 0x46554746)
    patch("version_2", "version", "<I", 2)
    patch("version_big_endian", "version", "<I", 0x03000000)
    patch("tensor_count_huge", "tensor_count", "<Q", 1 << 62)
    patch("tensor_count_plus_one", "tensor_count", "<Q", len(tensors) + 1)
    patch("kv_count_huge", "kv_count", "<Q", (1 << 64) - 1)
    patch("key_length_huge", "kv:general.architecture:keylen", "<Q", 1 << 40)
    patch("key_length_past_end", "kv:general.architecture:keylen", "<Q", 60000)
    patch("key_length_zero", "kv:general.architecture:keylen", "<Q", 0)
    patch("value_type_unknown", "kv:general.architecture:type", "<I", 13)
    patch("value_type_huge", "kv:llama.block_count:type", "<I", 0xFFFFFFFF)
    patch("string_length_huge", "kv:general.name:strlen", "<Q", 1 << 63)
    patch("string_length_past_end", "kv:tokenizer.chat_template:strlen", "<Q", len(base))
    patch("array_element_type_unknown", "kv:tokenizer.ggml.tokens:elemtype", "<I", 77)
    patch("array_count_huge", "kv:tokenizer.ggml.tokens:count", "<Q", 1 << 60)
    patch("array_count_past_end", "kv:tokenizer.ggml.tokens:count", "<Q", len(base) // 8)
    patch("numeric_array_count_huge", "kv:tokenizer.ggml.token_type:count", "<Q", 1 << 61)
    patch("array_string_length_huge", "kv:tokenizer.ggml.tokens[5]:strlen", "<Q", 1 << 50)
    patch("bool_value_2", "kv:tokenizer.ggml.add_bos_token:value", "<B", 2)
    patch("tensor_name_length_huge", "t:%s:namelen" % norm, "<Q", 1 << 45)
    patch("tensor_name_length_65", "t:%s:namelen" % norm, "<Q", 65)
    patch("tensor_name_length_zero", "t:%s:namelen" % norm, "<Q", 0)
    patch("n_dims_0", "t:%s:ndims" % emb, "<I", 0)
    patch("n_dims_5", "t:%s:ndims" % emb, "<I", 5)
    patch("n_dims_huge", "t:%s:ndims" % emb, "<I", 0x80000000)
    patch("dim_zero", "t:%s:ne1" % emb, "<Q", 0)
    patch("dim_huge", "t:%s:ne1" % emb, "<Q", (1 << 64) - 1)
    patch("dim_past_end", "t:%s:ne1" % emb, "<Q", 1 << 20)
    patch("dim_product_overflow", "t:%s:ne1" % emb, "<Q", 1 << 62)
    patch("dim0_not_block_multiple", "t:%s:ne0" % attn_k, "<Q", 577)
    patch("tensor_type_unknown", "t:%s:type" % norm, "<I", 99)
    patch("tensor_type_removed_q4_2", "t:%s:type" % attn_k, "<I", 4)
    patch("tensor_offset_misaligned", "t:%s:offset" % attn_k, "<Q", 4000 + 1)
    patch("tensor_offset_past_end", "t:%s:offset" % attn_k, "<Q", 1 << 20)
    patch("tensor_offset_wraps", "t:%s:offset" % attn_k, "<Q", (1 << 64) - 32)
    patch("tensor_offset_overlap", "t:%s:offset" % norm, "<Q", 1024)
    b = bytearray(base)
    b[at["kv:general.type:keylen"] + 8 + 7] = ord(" ")  # "general type": not a valid key
    files["key_invalid_space"] = b
    b = bytearray(base)
    b[at["kv:general.type:keylen"] + 8 + 7] = 0
    files["key_invalid_nul"] = b

    def variant(name, **kw):
        files[name] = build(kw.pop("kvs", kvs), kw.pop("tensors", tensors), **kw)[0]

    # general.name and general.type have the same length, so this only duplicates a key.
    variant("duplicate_key", kvs=[(("general.name" if k == "general.type" else k), t, v) for k, t, v in kvs])
    variant("duplicate_tensor_name", tensors=tensors + [(norm,) + tuple(tensors[1][1:])])
    for a in (0, 3, 48, 1 << 31):
        variant("alignment_%d" % a, kvs=kvs + [("general.alignment", U32, a)], alignment=max(a, 1) if a in (3, 48) else 32)
    variant("alignment_string", kvs=kvs + [("general.alignment", STRING, "32")])
    nested3 = (ARRAY, [(ARRAY, [(U32, [1])])])
    variant("array_nested_three_deep", kvs=kvs + [("test.nested", ARRAY, nested3)])

    # Truncations every ~1/40 of the header, plus cuts inside each tensor's data.
    header_end = at["infos_end"]
    cuts = sorted(set([0, 3, 4, 7, 8, 20, 23, 24, 30] + list(range(31, header_end, header_end // 40 + 1)) +
                      [header_end - 1, at["data"], at["data"] + 100, len(base) - 1] +
                      [at[k] + 1 for k in at if k.startswith("t:")]))
    for c in cuts:
        files["truncated_at_%06d" % c] = base[:c]

    mal_dir = os.path.join(out_dir, "malformed")
    for old in os.listdir(mal_dir):
        if old.endswith(".gguf"):
            os.remove(os.path.join(mal_dir, old))
    for name, data in sorted(files.items()):
        with open(os.path.join(mal_dir, name + ".gguf"), "wb") as f:
            f.write(data)
    print("wrote valid_small.gguf (%d bytes) and %d malformed files to %s" % (len(base), len(files), out_dir))


if __name__ == "__main__":
    main()
