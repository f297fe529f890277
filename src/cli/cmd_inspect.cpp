#include <cinttypes>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "gguf/ggml_types.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_parser.h"

namespace {

using agentkv::GgufFile;
using agentkv::GgufValueType;

std::string type_label(const agentkv::GgufValue& v) {
  if (v.type != GgufValueType::ARRAY) return agentkv::gguf_value_type_name(v.type);
  return std::string("ARRAY[") + agentkv::gguf_value_type_name(v.array_type) + "," +
         std::to_string(v.array_count) + "]";
}

std::string shape(const agentkv::GgufTensorInfo& t) {
  std::string s = "[";
  for (int d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "agentkv: error: usage: agentkv inspect FILE.gguf\n");
    return 1;
  }
  auto opened = GgufFile::open(argv[1]);
  if (!opened.ok()) {
    std::fprintf(stderr, "agentkv: error: %s\n", opened.error().c_str());
    return 1;
  }
  const GgufFile& f = **opened;
  std::printf("file: %s\nversion: %u  size: %zu  alignment: %zu  data offset: %zu\n", argv[1], f.version(),
              f.file_size(), f.alignment(), f.data_offset());
  std::printf("\nmetadata (%zu keys):\n", f.keys().size());
  for (const std::string& key : f.keys()) {
    std::printf("  %-44s %-20s %s\n", key.c_str(), type_label(*f.find(key)).c_str(),
                f.value_to_string(key).c_str());
  }
  std::printf("\ntensors (%zu):\n", f.tensors().size());
  std::printf("  %5s  %-40s %-6s %-22s %12s %12s\n", "#", "name", "type", "shape", "offset", "bytes");
  for (size_t k = 0; k < f.tensors().size(); ++k) {
    const agentkv::GgufTensorInfo& t = f.tensors()[k];
    std::printf("  %5zu  %-40s %-6s %-22s %12" PRIu64 " %12" PRIu64 "\n", k,
                agentkv::gguf_printable(t.name).c_str(), agentkv::ggml_type_info(t.type)->name,
                shape(t).c_str(), t.offset, t.nbytes);
  }
  return 0;
}
