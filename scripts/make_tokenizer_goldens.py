#!/usr/bin/env python3
"""Writes the tokenizer corpus and llama.cpp goldens used by tests/model/tokenizer_golden_test.cpp.

  tests/data/tokenizer/corpus.jsonl
      one JSON object per line: {"text": "..."} for valid UTF-8 strings, or {"hex": "..."} (the raw
      bytes, lowercase hex) for strings that are not valid UTF-8 and so cannot be JSON strings.
      The corpus is generated deterministically by this script (fixed seed).
  tests/data/tokenizer/<model>.golden.jsonl
      line 1: {"meta": {...}}  llama.cpp version, vocab facts (bos/eos/eog ids, n_vocab, add_bos)
      then one line per corpus entry, same order:
      {"i": N, "hex": input bytes,
       "special": ids with add_special=false, parse_special=true,
       "plain":   ids with add_special=false, parse_special=false,
       "bos":     ids with add_special=true,  parse_special=true,
       "detok_special_hex": llama_detokenize(special ids, remove_special=false, unparse_special=true),
       "detok_plain_hex":   llama_detokenize(plain ids,   remove_special=false, unparse_special=false)}
      Detokenized text is hex because byte-fallback output can be invalid UTF-8.

Usage (needs the llama.cpp shared library built from the llama-cpp-python 0.3.36 sdist):
  PYTHONPATH=/tmp/dl/llama_cpp_python-0.3.36 \
  LLAMA_CPP_LIB_PATH=/tmp/dl/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin \
  python3 scripts/make_tokenizer_goldens.py [--models-dir ~/.cache/agentkv/models]
  python3 scripts/make_tokenizer_goldens.py --corpus-only
"""
import argparse
import json
import os
import random
import sys

LLAMA_CPP_COMMIT = "0c1e570"
LLAMA_CPP_PYTHON = "0.3.36"
MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "tokenizer")


def llama_style_decode_overflows(b: bytes) -> bool:
    """True if llama.cpp's lenient UTF-8 decoder would produce a code point above U+10FFFF
    (4-byte forms with lead F4 90.. or F5..F7). llama.cpp then throws from inside llama_tokenize
    and the process aborts, so such inputs cannot have goldens."""
    i = 0
    while i < len(b):
        c = b[i]
        cont = lambda k: i + k < len(b) and (b[i + k] & 0xC0) == 0x80
        if c < 0x80:
            i += 1
        elif (c & 0xE0) == 0xC0 and cont(1):
            i += 2
        elif (c & 0xF0) == 0xE0 and cont(1) and cont(2):
            i += 3
        elif (c & 0xF8) == 0xF0 and cont(1) and cont(2) and cont(3):
            cp = ((c & 7) << 18) | ((b[i + 1] & 0x3F) << 12) | ((b[i + 2] & 0x3F) << 6) | (b[i + 3] & 0x3F)
            if cp > 0x10FFFF:
                return True
            i += 4
        else:
            i += 1
    return False


def build_corpus():
    out = []

    def add(x):
        out.append(x if isinstance(x, bytes) else x.encode("utf-8"))

    prose = [
        "Hello world", "Hello, we can use", "The capital of France is", "Hello world! 123",
        "  multiple   spaces", "\n", "Café déjà vu.",
        "You are a helpful AI assistant named SmolLM, trained by Hugging Face",
        "The quick brown fox jumps over the lazy dog.",
        "It's a test: don't, won't, I'm, you're, we've, they'll, he'd.",
        "IT'S LOUD: DON'T YOU'RE WE'VE THEY'LL",
        "Once upon a time, in a land far, far away, there lived a tokenizer.",
        "Mr. Smith paid $1,234.56 for 3 items (i.e., 411.52 each) on 2024-05-17.",
        "e-mail: someone@example.com; url: https://example.org/path?q=1&r=two#frag",
        "\"Quoted\" and 'single' and `backticks` and «guillemets» and „Anführungszeichen“.",
        "Ellipsis… em—dash – en-dash ‘curly’ “quotes”", "A", "a", " ", "  ", "   ", "\t", "\r\n",
        "", " leading space", "trailing space ", " both ", "x y", "x  y", "x   y", "x\ty", "x\t\ty",
        "x\ny", "x\n\ny", "x\n\n\ny", "x \n y", "x\u00a0y", "x\u3000y", "x\u2009y", "x\u200by",
        "x\u2028y", "x\u0085y", "\x1c\x1d\x1e\x1f", "a\x00b", "\x7f\x01\x02",
    ]
    for s in prose:
        add(s)
    code = [
        "def f(x):\n    return x * 2\n",
        "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
        "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }\n",
        "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
        "const add = (a, b) => a + b; // arrow\nconsole.log(add(1, 2));\n",
        "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
        "<html><body><div class=\"x\">Hi</div></body></html>",
        "<table><tr><td>1</td><td>2</td></tr></table>",
        "<h1>Title</h1><strong>bold</strong> <em>it</em> <code>x</code> </s>",
        "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
        "    indented four\n        indented eight\n",
        "if x == 1:\n\tpass\nelif x != 2:\n\t\tpass\n",
        "$ ls -la | grep '^d' && echo done >> /tmp/log.txt 2>&1",
        "x <<= 2; y >>= 3; z ^= ~w; a ||= b; c &&= d;",
        "#!/usr/bin/env bash\nset -euo pipefail\n",
        "matrix[i][j] += alpha * (beta - gamma) / delta % epsilon;",
        "public static void main(String[] args) throws Exception {}",
        "λx. x + 1  // lambda",
    ]
    for s in code:
        add(s)
    nums = ["0", "7", "42", "123", "1234", "12345", "1234567890", "3.14159", "-17", "+1e-9",
            "1,000,000", "0x1F", "v1.2.3", "a1b2c3", "2024年", "½ ¾ ² ³ ¹", "٠١٢٣٤٥", "१२३", "Ⅻ ⅻ",
            "１２３", "①②③", "10%", "#1", "x2", "42nd", " 1", "  12", "1 2 3", "1\n2"]
    for s in nums:
        add(s)
    intl = [
        "naïve coöperate résumé façade Ångström", "Ünïcödé Çà Ñoño", "Straße groß ß ẞ",
        "Ελληνικά γράμματα", "Русский текст, привет мир!", "Українська мова",
        "日本語のテキストです。", "中文文本，你好世界！", "한국어 텍스트입니다.", "ひらがな カタカナ 漢字",
        "العربية نص تجريبي", "مرحبا بالعالم 123", "עברית טקסט לדוגמה", "שָׁלוֹם",
        "हिन्दी पाठ नमस्ते दुनिया", "ภาษาไทยสวัสดีชาวโลก", "தமிழ் உரை", "বাংলা লেখা",
        "Tiếng Việt có dấu", "ქართული", "Հայերեն", "አማርኛ", "ᠮᠣᠩᠭᠣᠯ", "ꦗꦮ",
        "e\u0301 combining acute", "a\u0308o\u0308u\u0308", "\u202eRTL override\u202c",
        "\u200d\u200c zero width", "\ufeffBOM at start", "\ufffd replacement char",
        "\U0001d400\U0001d401 math bold", "\U00020000 CJK ext B", "\U0010ffff max",
    ]
    for s in intl:
        add(s)
    emoji = [
        "😀", "👍🏽", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flag", "🇫🇷🇩🇪 flags", "❤️ heart", "I ❤ NY",
        "🤖 robots 🤖🤖", "emoji😀inside", "👩🏻‍💻 coder", "🫠🫡", "☃ ★ ✓ ✗ ⚠", "©®™",
        "∑∏∫√∞≈≠≤≥", "→ ← ↑ ↓ ⇒", "🧑‍🤝‍🧑",
    ]
    for s in emoji:
        add(s)
    special = [
        "<|im_start|>user\nhi<|im_end|>", "<|im_start|>system\nYou are helpful.<|im_end|>\n",
        "<|im_start|>assistant\n", "<|endoftext|>", "<|im_end|><|endoftext|>",
        "text<|im_start|>text", "<|im_start|><|im_start|>", "<|im_start", "im_start|>",
        "<reponame>repo<file_sep>", "<jupyter_code>x=1<jupyter_output>", "<empty_output>",
        "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n", "<start_of_turn>model\n",
        "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "[multimodal]", "<unused0>", "<unused123>",
        "<start_of_image>", "<end_of_image>", "a<bos>b", " <eos> ", "<end_of_turn><eos>",
        "<start_of_turn> model", "<<start_of_turn>>", "<start_of_turn", "</s>", "<s>",
        "<0x41>", "<0xFF>", "▁", "▁▁hello", "hello▁world",
    ]
    for s in special:
        add(s)
    ws = ["\n\n", "\n\n\n", "\n" * 40, " " * 33, "\t" * 35, " \n", "\n ", " \t ", "a\n\n\n\nb",
          "a" + " " * 10 + "b", "\t\ta", "a\t", "  \n  \n", "\r", "\r\r\n\n", "\v\f"]
    for s in ws:
        add(s)
    invalid = [
        b"\xff", b"\xfe\xff", b"\x80", b"abc\x80def", b"\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(",
        b"\xf0\x9f\x98", b"\xf0\x9f\x98(", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\xaf", b"\xed\xa0\x80",
        b"\xed\xbf\xbf", b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80", b"hello\xffworld",
        b"\xe6\x97\xa5\xe6\x9c", b" \xff ", b"1\xff2", b"'\xffs", b"\xc3\xa9\xc3", b"\xa9\xc3\xa9",
        b"<|im_start|>\xff<|im_end|>", b"<start_of_turn>\x80\x81<end_of_turn>",
    ]
    for b in invalid:
        add(b)

    rng = random.Random(20240517)
    pool = [s for s in prose + code + nums + intl + emoji + special + ws]
    alphabet = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n\t.,;:!?'\"()[]{}<>|/\\-_=+*&^%$#@~`") + [
        "é", "ß", "ñ", "日", "本", "😀", "👍", "\u200d", "▁", "Ġ", "ا", "ש", "क", "ก", "\u00a0", "½", "٣"]
    while len(out) < 260:
        k = rng.randint(2, 4)
        out.append(" ".join(rng.choice(pool) for _ in range(k)).encode("utf-8"))
    while len(out) < 300:
        n = rng.randint(1, 40)
        out.append("".join(rng.choice(alphabet) for _ in range(n)).encode("utf-8"))
    while len(out) < 330:
        n = rng.randint(1, 24)
        b = bytes(rng.randrange(256) for _ in range(n))
        if not llama_style_decode_overflows(b):
            out.append(b)
    # A longer text, to exercise merge queues on long pieces.
    out.append((" ".join(prose[7:14]) * 4).encode("utf-8"))
    out.append(("x" * 300 + " " + "ab" * 150).encode("utf-8"))
    for b in out:
        assert not llama_style_decode_overflows(b), b
    return out


def corpus_line(b: bytes) -> str:
    try:
        return json.dumps({"text": b.decode("utf-8")}, ensure_ascii=False)
    except UnicodeDecodeError:
        return json.dumps({"hex": b.hex()})


def write_corpus(entries):
    os.makedirs(DATA, exist_ok=True)
    with open(os.path.join(DATA, "corpus.jsonl"), "w", encoding="utf-8", newline="\n") as f:
        for b in entries:
            f.write(corpus_line(b) + "\n")


def make_goldens(entries, models_dir):
    import ctypes
    import llama_cpp as lc

    lc.llama_backend_init()
    for name, fname in MODELS.items():
        path = os.path.join(models_dir, fname)
        params = lc.llama_model_default_params()
        params.vocab_only = True
        model = lc.llama_model_load_from_file(path.encode(), params)
        if not model:
            sys.exit(f"cannot load {path}")
        vocab = lc.llama_model_get_vocab(model)
        n_vocab = lc.llama_vocab_n_tokens(vocab)

        def tokenize(b, add_special, parse_special):
            cap = len(b) + 16
            arr = (lc.llama_token * cap)()
            n = lc.llama_tokenize(vocab, b, len(b), arr, cap, add_special, parse_special)
            assert n >= 0, n
            return list(arr[:n])

        def detok(ids, unparse_special):
            arr = (lc.llama_token * max(1, len(ids)))(*ids)
            cap = 64 + 64 * len(ids)
            buf = ctypes.create_string_buffer(cap)
            n = lc.llama_detokenize(vocab, arr, len(ids), buf, cap, False, unparse_special)
            assert n >= 0, n
            return buf.raw[:n]

        meta = {
            "llama_cpp_commit": LLAMA_CPP_COMMIT,
            "llama_cpp_python": LLAMA_CPP_PYTHON,
            "model_file": fname,
            "n_vocab": n_vocab,
            "bos": lc.llama_vocab_bos(vocab),
            "eos": lc.llama_vocab_eos(vocab),
            "eot": lc.llama_vocab_eot(vocab),
            "add_bos": bool(lc.llama_vocab_get_add_bos(vocab)),
            "eog": [i for i in range(n_vocab) if lc.llama_vocab_is_eog(vocab, i)],
            "control": [i for i in range(n_vocab) if lc.llama_vocab_is_control(vocab, i)],
            "corpus_size": len(entries),
        }
        out_path = os.path.join(DATA, f"{name}.golden.jsonl")
        with open(out_path, "w", encoding="utf-8", newline="\n") as f:
            f.write(json.dumps({"meta": meta}) + "\n")
            for i, b in enumerate(entries):
                sp = tokenize(b, False, True)
                pl = tokenize(b, False, False)
                rec = {
                    "i": i,
                    "hex": b.hex(),
                    "special": sp,
                    "plain": pl,
                    "bos": tokenize(b, True, True),
                    "detok_special_hex": detok(sp, True).hex(),
                    "detok_plain_hex": detok(pl, False).hex(),
                }
                f.write(json.dumps(rec) + "\n")
        lc.llama_model_free(model)
        print(f"wrote {out_path}: {len(entries)} entries, eog={meta['eog']}")


CONVERSATIONS = [
    [{"role": "user", "content": "Hello"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"}],
    [{"role": "user", "content": "Hi!"}, {"role": "assistant", "content": "Hello! How can I help?"},
     {"role": "user", "content": "  Tell me a joke.\n"}],
    [{"role": "system", "content": "Sys"}, {"role": "user", "content": "a"},
     {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}],
    [{"role": "user", "content": "Unicode: café 日本語 😀 and <|im_end|> inside"}],
]


def render_gemma(messages, add_generation_prompt):
    """The Gemma 3 instruction format (google/gemma-3 chat template), minus the leading <bos>
    which the tokenizer adds itself."""
    prefix = ""
    if messages and messages[0]["role"] == "system":
        prefix = messages[0]["content"] + "\n\n"
        messages = messages[1:]
    out = ""
    for i, m in enumerate(messages):
        role = "model" if m["role"] == "assistant" else m["role"]
        out += "<start_of_turn>" + role + "\n" + (prefix if i == 0 else "") + m["content"].strip() + "<end_of_turn>\n"
    if add_generation_prompt:
        out += "<start_of_turn>model\n"
    return out


def make_chat_goldens(models_dir):
    """tests/data/tokenizer/<model>.chat.golden.jsonl: rendered prompt (SmolLM2: the GGUF's own
    Jinja template via jinja2; Gemma: render_gemma) and llama.cpp's ids for it
    (add_special = the vocab default, parse_special = true)."""
    import gguf
    import jinja2
    import llama_cpp as lc

    for name, fname in MODELS.items():
        path = os.path.join(models_dir, fname)
        reader = gguf.GGUFReader(path)
        field = reader.fields.get("tokenizer.chat_template")
        tmpl = jinja2.Environment().from_string(field.contents()) if field else None
        params = lc.llama_model_default_params()
        params.vocab_only = True
        model = lc.llama_model_load_from_file(path.encode(), params)
        vocab = lc.llama_model_get_vocab(model)
        add_bos = bool(lc.llama_vocab_get_add_bos(vocab))
        out_path = os.path.join(DATA, f"{name}.chat.golden.jsonl")
        with open(out_path, "w", encoding="utf-8", newline="\n") as f:
            for conv in CONVERSATIONS:
                for gen in (True, False):
                    if tmpl is not None:
                        text = tmpl.render(messages=conv, add_generation_prompt=gen)
                    else:
                        text = render_gemma(conv, gen)
                    b = text.encode("utf-8")
                    cap = len(b) + 16
                    arr = (lc.llama_token * cap)()
                    n = lc.llama_tokenize(vocab, b, len(b), arr, cap, add_bos, True)
                    f.write(json.dumps({"messages": conv, "add_generation_prompt": gen, "text": text,
                                        "ids": list(arr[:n])}, ensure_ascii=False) + "\n")
        lc.llama_model_free(model)
        print(f"wrote {out_path}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models-dir", default=os.path.expanduser("~/.cache/agentkv/models"))
    ap.add_argument("--corpus-only", action="store_true")
    args = ap.parse_args()
    entries = build_corpus()
    write_corpus(entries)
    print(f"corpus: {len(entries)} entries")
    if not args.corpus_only:
        make_goldens(entries, args.models_dir)
        make_chat_goldens(args.models_dir)


if __name__ == "__main__":
    main()
