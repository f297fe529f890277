#include "prm/verify_head.h"

#include "tokenizer/chat_template.h"

namespace agentkv::prm {
namespace {

Result<int32_t> single_token(const Tokenizer& tok, const std::string& text) {
  const std::vector<int32_t> ids = tok.encode(text, false, false);
  if (ids.size() != 1)
    return make_error("verify answer '" + text + "' is " + std::to_string(ids.size()) + " tokens, expected 1");
  return ids[0];
}

}  // namespace

Result<VerifyHead> make_verify_head(const Tokenizer& tok, const std::string& question, const std::string& pos,
                                    const std::string& neg) {
  VerifyHead head;
  head.question = question;
  auto markers = chat_turn_markers(tok);
  if (!markers.ok()) return make_error("verify head: " + markers.error());
  const std::string text = markers->end_of_turn + markers->user_open + question + markers->assistant_open;
  head.tokens = tok.encode(text, false, true);
  auto p = single_token(tok, pos);
  if (!p.ok()) return p.status_error();
  auto n = single_token(tok, neg);
  if (!n.ok()) return n.status_error();
  if (*p == *n) return make_error("verify answers '" + pos + "' and '" + neg + "' are the same token");
  head.pos_token = *p;
  head.neg_token = *n;
  return head;
}

}  // namespace agentkv::prm
