// libFuzzer target: GgufFile::parse must reject or accept any byte string without crashing, and an
// accepted file must survive every accessor (including tensor data reads, which ASan bounds-checks).
// Seed it with the committed synthetic files:
//   mkdir -p corpus && cp tests/data/valid_small.gguf tests/data/malformed/*.gguf corpus/
//   build-fuzz/gguf_fuzz -max_total_time=60 -max_len=20000 corpus
#include <cstddef>
#include <cstdint>

#include "gguf/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = agentkv::GgufFile::parse(data, size);
  if (!r.ok()) return 0;
  const agentkv::GgufFile& f = **r;
  volatile size_t sink = f.version() + f.alignment() + f.data_offset() + f.file_size();
  for (const std::string& key : f.keys()) {
    sink = sink + f.has(key) + f.value_to_string(key, 4).size();
    sink = sink + static_cast<size_t>(f.get_int_or(key, 0)) + f.get_bool_or(key, false);
    sink = sink + (f.get_float_or(key, 0.0) > 0) + f.get_string_or(key, "").size();
    if (auto a = f.get_string_array(key); a.ok()) sink = sink + a->size();
    if (auto a = f.get_float_array(key); a.ok()) sink = sink + a->size();
    if (auto a = f.get_int_array(key); a.ok()) sink = sink + a->size();
  }
  for (const agentkv::GgufTensorInfo& t : f.tensors()) {
    const agentkv::GgufTensorInfo* same = f.tensor(t.name);
    sink = sink + (same == &t) + t.data[0] + t.data[t.nbytes - 1];
  }
  (void)sink;
  return 0;
}
