// The agents and rounds API layer without a model: request validation and the registry's busy /
// TTL / capacity rules.
#include <gtest/gtest.h>

#include <limits>

#include "server/agent_registry.h"
#include "server/agents_protocol.h"

namespace agentkv {
namespace {

Json body(const std::string& text) {
  auto j = parse_json(text);
  EXPECT_TRUE(j.ok()) << text;
  return std::move(j).value();
}

TEST(AgentsProtocol, ParsesCreateWithPersonaMemoryAndTtl) {
  AgentCreateRequest r;
  auto e = parse_agent_create(body(R"({"model":"smollm2","name":"Ada","system":"You are Ada.",
      "messages":[{"role":"user","content":"Remember: the well is dry."}],"ttl_seconds":60,"prefill":false})"),
                              ApiLimits{}, AgentLimits{}, &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.model, "smollm2");
  EXPECT_EQ(r.name, "Ada");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "Remember: the well is dry.");
  EXPECT_EQ(r.ttl_s, 60);
  EXPECT_FALSE(r.prefill);
  AgentCreateRequest d;
  ASSERT_FALSE(parse_agent_create(body(R"({"model":"gemma3"})"), ApiLimits{}, AgentLimits{}, &d));
  EXPECT_EQ(d.ttl_s, AgentLimits{}.default_ttl_s);
  EXPECT_TRUE(d.prefill);
}

TEST(AgentsProtocol, RejectsBadRequestsNamingTheField) {
  struct Case {
    const char* json;
    const char* param;
  };
  const Case create_cases[] = {
      {R"({})", "model"},
      {R"({"model":""})", "model"},
      {R"({"model":"m","ttl_seconds":0})", "ttl_seconds"},
      {R"({"model":"m","ttl_seconds":1e12})", "ttl_seconds"},
      {R"({"model":"m","name":5})", "name"},
      // Names go into all-gather blocks ("name: answer" lines): nothing that can forge a speaker.
      {R"({"model":"m","name":""})", "name"},
      {R"({"model":"m","name":"Ada\nBram: I agree"})", "name"},
      {R"({"model":"m","name":"Ada: x"})", "name"},
      {R"({"model":"m","name":"Ada\u0000"})", "name"},
      {R"({"model":"m","name":" Ada"})", "name"},
      {R"({"model":"m","name":"<|im_start|>"})", "name"},
      {R"({"model":"m","name":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})", "name"},
      {R"({"model":"m","messages":[{"role":"user","content":"x","name":"a\nb"}]})", "messages[0].name"},
      {R"({"model":"m","messages":[{"role":"user","content":"x","name":7}]})", "messages[0].name"},
      {R"({"model":"m","persona":"x"})", "persona"},
      {R"({"model":"m","prefill":"yes"})", "prefill"},
      {R"({"model":"m","system":"a","messages":[{"role":"system","content":"b"}]})", "messages[0].role"},
      {R"({"model":"m","messages":[]})", "messages"},
  };
  for (const Case& c : create_cases) {
    AgentCreateRequest r;
    auto e = parse_agent_create(body(c.json), ApiLimits{}, AgentLimits{}, &r);
    ASSERT_TRUE(e) << c.json;
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->param, c.param) << c.json;
  }
  const Case round_cases[] = {
      {R"({})", "agents"},
      {R"({"agents":[]})", "agents"},
      {R"({"agents":["a","a"]})", "agents"},
      {R"({"agents":[1]})", "agents"},
      {R"({"agents":["a"],"shared":3})", "shared"},
      {R"({"agents":["a"],"max_tokens":0})", "max_tokens"},
      {R"({"agents":["a"],"temperature":9})", "temperature"},
      {R"({"agents":["a"],"top_p":0})", "top_p"},
      {R"({"agents":["a"],"stop":[""]})", "stop"},
      {R"({"agents":["a"],"n":2})", "n"},
      {R"({"agents":["a"],"kv_sharing":"yes"})", "kv_sharing"},
      {R"({"agents":["a"],"kv_sharing":1})", "kv_sharing"},
      {R"({"agents":["a"],"recompute":1.5})", "recompute"},
      {R"({"agents":["a"],"recompute":-0.1})", "recompute"},
      {R"({"agents":["a"],"recompute":"all"})", "recompute"},
  };
  for (const Case& c : round_cases) {
    RoundRequest r;
    auto e = parse_round(body(c.json), ApiLimits{}, AgentLimits{}, &r);
    ASSERT_TRUE(e) << c.json;
    EXPECT_EQ(e->param, c.param) << c.json;
  }
  AgentRespondRequest rr;
  EXPECT_TRUE(parse_agent_respond(body(R"({"stream":true})"), ApiLimits{}, &rr));
  EXPECT_TRUE(parse_agent_respond(body(R"([])"), ApiLimits{}, &rr));
  AgentForkRequest fr;
  EXPECT_TRUE(parse_agent_fork(body(R"({"ttl_seconds":"1"})"), AgentLimits{}, &fr));
  auto bad_name = parse_agent_fork(body(R"({"name":"Bo\rb"})"), AgentLimits{}, &fr);
  ASSERT_TRUE(bad_name);
  EXPECT_EQ(bad_name->param, "name");
  for (const char* ok : {"Ada", "agent-0a1b", "Dr. Bram_2", "x"}) {
    AgentCreateRequest r;
    auto e = parse_agent_create(body(std::string(R"({"model":"m","name":")") + ok + "\"}"), ApiLimits{}, AgentLimits{}, &r);
    EXPECT_FALSE(e) << ok << ": " << e->message;
    EXPECT_EQ(r.name, ok);
  }
  std::vector<ChatMessage> msgs;
  EXPECT_TRUE(parse_agent_messages(body(R"({"messages":[{"role":"tool","content":"x"}]})"), ApiLimits{}, &msgs));
}

// Agent migration: an export document (tool calls, segments, a last answer) parses back into the same
// agent, and a malformed one is refused naming the field.
TEST(AgentsProtocol, AnExportParsesBackAsAnImport) {
  AgentExport ex;
  ex.id = "agent-0000000000000007";
  ex.name = "Ada";
  ex.model = "smollm2";
  ex.ttl_s = 120;
  ex.messages = {ChatMessage{"system", "You are Ada."}, ChatMessage{"user", "Weather?"}};
  ChatMessage call{"assistant", ""};
  call.tool_calls = {ChatToolCall{"call_1", "get_weather", R"({"city":"Oslo"})"}};
  ChatMessage result{"tool", "rain"};
  result.tool_call_id = "call_1";
  ex.messages.push_back(call);
  ex.messages.push_back(result);
  ex.segments = {"Bram: the mill is closed."};
  ex.last_answer = "Rain in Oslo.";
  ex.resident_tokens = 321;
  ex.published_blocks = 20;
  ex.published = true;
  const Json doc = agent_export_json(ex);
  AgentExport back;
  auto e = parse_agent_import(doc, ApiLimits{}, AgentLimits{}, &back);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(back.id, ex.id);
  EXPECT_EQ(back.name, "Ada");
  EXPECT_EQ(back.model, "smollm2");
  EXPECT_EQ(back.ttl_s, 120);
  ASSERT_EQ(back.messages.size(), 4u);
  EXPECT_EQ(back.messages[0].role, "system");
  ASSERT_EQ(back.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(back.messages[2].tool_calls[0].name, "get_weather");
  EXPECT_EQ(back.messages[2].tool_calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(back.messages[3].tool_call_id, "call_1");
  EXPECT_EQ(back.segments, ex.segments);
  EXPECT_EQ(back.last_answer, ex.last_answer);
  EXPECT_EQ(back.resident_tokens, 321);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"format":1,"model":"m"})", "object"},
      {R"({"object":"agent","format":1,"model":"m"})", "object"},
      {R"({"object":"agent.export","format":2,"model":"m"})", "format"},
      {R"({"object":"agent.export","format":"1","model":"m"})", "format"},
      {R"({"object":"agent.export","format":1})", "model"},
      {R"({"object":"agent.export","format":1,"model":"m","segments":"x"})", "segments"},
      {R"({"object":"agent.export","format":1,"model":"m","segments":[1]})", "segments[0]"},
      {R"({"object":"agent.export","format":1,"model":"m","resident_tokens":-1})", "resident_tokens"},
      {R"({"object":"agent.export","format":1,"model":"m","resident_tokens":1.5})", "resident_tokens"},
      {R"({"object":"agent.export","format":1,"model":"m","messages":[{"role":"wizard","content":"x"}]})", "messages[0].role"},
      {R"({"object":"agent.export","format":1,"model":"m","kv":3})", "kv"},
      {R"({"object":"agent.export","format":1,"model":"m","extra":3})", "extra"},
  };
  for (const auto& [text, param] : bad) {
    AgentExport r;
    auto err = parse_agent_import(body(text), ApiLimits{}, AgentLimits{}, &r);
    ASSERT_TRUE(err) << text;
    EXPECT_EQ(err->status, 400) << text;
    EXPECT_EQ(err->param, param) << text << ": " << err->message;
  }
  AgentExport empty;
  EXPECT_FALSE(parse_agent_import(body(R"({"object":"agent.export","format":1,"model":"m","messages":[]})"),
                                  ApiLimits{}, AgentLimits{}, &empty));
  EXPECT_TRUE(empty.messages.empty());
}

TEST(AgentsProtocol, ParsesARound) {
  RoundRequest r;
  auto e = parse_round(body(R"({"agents":["a","b"],"shared":"news","instruction":"answer","max_tokens":5,
                                "temperature":0,"seed":3,"stop":"\n"})"),
                       ApiLimits{}, AgentLimits{}, &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.agents, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*r.shared, "news");
  EXPECT_EQ(r.instruction, "answer");
  EXPECT_EQ(*r.gen.max_tokens, 5);
  EXPECT_EQ(*r.gen.seed, 3u);
  EXPECT_EQ(r.gen.stop, std::vector<std::string>{"\n"});
  EXPECT_FALSE(r.kv_sharing);
  EXPECT_FALSE(r.recompute);
  ASSERT_FALSE(parse_round(body(R"({"agents":["a"],"kv_sharing":false,"recompute":0.25})"), ApiLimits{}, AgentLimits{}, &r));
  EXPECT_EQ(r.kv_sharing, std::optional<bool>(false));
  EXPECT_EQ(r.recompute, std::optional<double>(0.25));
}

TEST(AgentsProtocol, ParsesStepScoreRequests) {
  StepScoreRequest r;
  auto e = parse_step_score(body(R"({"steps":["Step 1: 2 + 2 = 4","Step 1: 2 * 2 = 5\n"],"prefix":"x"})"), ApiLimits{},
                            AgentLimits{}, &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.steps.size(), 2u);
  EXPECT_EQ(r.steps[1], "Step 1: 2 * 2 = 5\n");
  EXPECT_EQ(r.prefix, "x");
  AgentLimits small;
  small.max_score_steps = 2;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({})", "steps"},
      {R"({"steps":[]})", "steps"},
      {R"({"steps":"one"})", "steps"},
      {R"({"steps":[" \n"]})", "steps[0]"},
      {R"({"steps":["a",null]})", "steps[1]"},
      {R"({"steps":["a","b","c"]})", "steps"},
      {R"({"steps":["a"],"prefix":1})", "prefix"},
      {R"({"steps":["a"],"n":2})", "n"},
      {R"([1])", ""},
  };
  for (const auto& [text, param] : bad) {
    auto err = parse_step_score(body(text), ApiLimits{}, small, &r);
    ASSERT_TRUE(err) << text;
    EXPECT_EQ(err->status, 400) << text;
    EXPECT_EQ(err->param, param) << text << ": " << err->message;
  }
}

TEST(AgentsProtocol, StepScoresJson) {
  StepScoreReply rep;
  rep.agent = "agent-1";
  rep.verifier = "probe";
  rep.feature_layer = 8;
  rep.context_tokens = 90;
  rep.cached_tokens = 80;
  rep.scores.push_back(StepScore{0.25, -1.0986, std::numeric_limits<float>::quiet_NaN(), 9});
  const std::string j = dump_json(step_scores_json(rep));
  EXPECT_NE(j.find(R"("object":"agent.step_scores")"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("logodds":null)"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("verifier":{"kind":"probe","layer":8})"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("cached_tokens":80)"), std::string::npos) << j;
}

TEST(AgentsProtocol, ParsesTransferRequestsNamingTheBadField) {
  AgentTransferRequest r;
  auto e = parse_agent_transfer(body(R"({"model":"gemma3","name":"Exec","native_last":32})"), &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.model, "gemma3");
  EXPECT_EQ(r.name, "Exec");
  EXPECT_EQ(r.native_last, 32);
  EXPECT_EQ(r.native_share, 0.0);  // a request naming one suffix asks for that one
  AgentTransferRequest d;
  ASSERT_FALSE(parse_agent_transfer(body(R"({"model":"gemma3","native_last":null})"), &d));
  EXPECT_EQ(d.native_last, kDefaultNativeLast);  // the measured default hybrid: at least 128 tokens
  EXPECT_EQ(d.native_share, kDefaultNativeShare);  // and at least 15% of the context
  EXPECT_EQ(d.recompute, 0.0);
  AgentTransferRequest share;
  ASSERT_FALSE(parse_agent_transfer(body(R"({"model":"gemma3","native_share":1})"), &share));
  EXPECT_EQ(share.native_share, 1.0);
  EXPECT_EQ(share.native_last, 0);
  EXPECT_TRUE(d.name.empty());
  AgentTransferRequest dev;
  ASSERT_FALSE(parse_agent_transfer(body(R"({"model":"gemma3","native_last":0,"recompute":0.25})"), &dev));
  EXPECT_EQ(dev.native_last, 0);
  EXPECT_EQ(dev.recompute, 0.25);
  EXPECT_EQ(dev.rare_share, 0.0);  // no rarity unless asked
  AgentTransferRequest rare;
  ASSERT_FALSE(parse_agent_transfer(body(R"({"model":"gemma3","rare_share":0.01})"), &rare));
  EXPECT_EQ(rare.rare_share, 0.01);
  EXPECT_EQ(rare.native_share, kDefaultNativeShare);  // with the default suffix
  EXPECT_EQ(rare.rare_max_tokens, 0);                  // no cap unless asked
  AgentTransferRequest capped;
  ASSERT_FALSE(parse_agent_transfer(body(R"({"model":"gemma3","rare_share":0.02,"rare_max_tokens":24})"), &capped));
  EXPECT_EQ(capped.rare_max_tokens, 24);
  const std::pair<const char*, const char*> bad[] = {
      {R"({"model":"gemma3","rare_share":1.5})", "rare_share"},
      {R"({"model":"gemma3","rare_share":"some"})", "rare_share"},
      {R"({"model":"gemma3","rare_share":0.02,"rare_max_tokens":0})", "rare_max_tokens"},
      {R"({"model":"gemma3","rare_share":0.02,"rare_max_tokens":2.5})", "rare_max_tokens"},
      {R"({"model":"gemma3","rare_max_tokens":24})", "rare_max_tokens"},  // a cap of nothing asked for
      {R"({})", "model"},
      {R"({"model":""})", "model"},
      {R"({"model":3})", "model"},
      {R"({"model":"gemma3","native_last":-1})", "native_last"},
      {R"({"model":"gemma3","native_last":1.5})", "native_last"},
      {R"({"model":"gemma3","native_last":"all"})", "native_last"},
      {R"({"model":"gemma3","native_last":16777217})", "native_last"},
      {R"({"model":"gemma3","native_share":1.5})", "native_share"},
      {R"({"model":"gemma3","native_share":-0.5})", "native_share"},
      {R"({"model":"gemma3","native_share":"half"})", "native_share"},
      {R"({"model":"gemma3","name":7})", "name"},
      {R"({"model":"gemma3","recompute":1.01})", "recompute"},
      {R"({"model":"gemma3","recompute":-0.1})", "recompute"},
      {R"({"model":"gemma3","recompute":"all"})", "recompute"},
      {R"({"model":"gemma3","ttl_seconds":60})", "ttl_seconds"},
      {R"([])", ""},
  };
  for (const auto& [json, param] : bad) {
    auto err = parse_agent_transfer(body(json), &r);
    ASSERT_TRUE(err) << json;
    EXPECT_EQ(err->status, 400) << json;
    EXPECT_EQ(err->param, param) << json;
  }
}

// The default hybrid is by rarity where the map kept its counts, the suffix default where it did not,
// and neither for a request that named any hybrid field.
TEST(AgentsProtocol, TransferDefaultHybridIsByRarityWhenTheMapHasCounts) {
  auto parsed = [](const char* json) {
    AgentTransferRequest r;
    EXPECT_FALSE(parse_agent_transfer(body(json), &r)) << json;
    return r;
  };
  AgentTransferRequest r = parsed(R"({"model":"gemma3"})");
  EXPECT_FALSE(r.hybrid_named);
  choose_default_hybrid(&r, true);
  EXPECT_EQ(r.rare_share, kDefaultRareShare);
  EXPECT_EQ(r.rare_max_tokens, kDefaultRareMaxTokens);
  EXPECT_EQ(r.native_share, kDefaultRareNativeShare);
  EXPECT_EQ(r.native_last, 0);
  AgentTransferRequest old = parsed(R"({"model":"gemma3"})");
  choose_default_hybrid(&old, false);  // a map fitted before maps kept counts
  EXPECT_EQ(old.rare_share, 0.0);
  EXPECT_EQ(old.native_last, kDefaultNativeLast);
  EXPECT_EQ(old.native_share, kDefaultNativeShare);
  for (const char* named : {R"({"model":"gemma3","native_last":64})", R"({"model":"gemma3","native_share":0.2})",
                            R"({"model":"gemma3","recompute":0.1})", R"({"model":"gemma3","rare_share":0})",
                            R"({"model":"gemma3","rare_share":0.01,"rare_max_tokens":8})"}) {
    AgentTransferRequest n = parsed(named);
    const AgentTransferRequest before = n;
    EXPECT_TRUE(n.hybrid_named) << named;
    choose_default_hybrid(&n, true);
    EXPECT_EQ(n.rare_share, before.rare_share) << named;
    EXPECT_EQ(n.native_share, before.native_share) << named;
    EXPECT_EQ(n.native_last, before.native_last) << named;
  }
}

TEST(AgentsProtocol, TransferSummaryJson) {
  TransferSummary t;
  t.method = "hybrid";
  t.from_model = "smollm2";
  t.context_tokens = 63;
  t.sender_tokens = 67;
  t.transferred_tokens = 46;
  t.native_tokens = 17;
  t.native_last = 16;
  t.seconds = 0.25;
  Json j = transfer_summary_json(t);
  EXPECT_EQ(j["method"], "hybrid");
  EXPECT_EQ(j["transferred_tokens"], 46);
  EXPECT_EQ(j["native_tokens"], 17);
  EXPECT_EQ(j["rare_share"], 0.0);
  EXPECT_EQ(j["rare_max_tokens"], 0);
  EXPECT_TRUE(j["native_prefill_seconds_estimate"].is_null());
  t.native_prefill_seconds_estimate = 0.5;
  EXPECT_EQ(transfer_summary_json(t)["native_prefill_seconds_estimate"], 0.5);
}

TEST(AgentRegistry, AcquireIsAllOrNoneAndBusyAgentsCannotBeTouched) {
  AgentRegistry reg(3);
  Agent a, b;
  ASSERT_FALSE(reg.add(&a));
  ASSERT_FALSE(reg.add(&b));
  EXPECT_NE(a.id, b.id);
  EXPECT_EQ(a.name, a.id) << "an unnamed agent is called by its id";
  std::vector<Agent> got;
  auto e = reg.acquire({a.id, "agent-missing"}, &got);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 404);
  EXPECT_FALSE(reg.get(a.id)->busy) << "a failed acquire marks nothing busy";
  ASSERT_FALSE(reg.acquire({a.id}, &got));
  EXPECT_EQ(reg.acquire({b.id, a.id}, &got)->status, 409);
  EXPECT_FALSE(reg.get(b.id)->busy);
  Agent removed;
  EXPECT_EQ(reg.remove(a.id, &removed)->status, 409);
  got[0].messages.push_back(ChatMessage{"user", "hi"});
  got[0].kv = 7;
  reg.finish(got[0]);
  EXPECT_FALSE(reg.get(a.id)->busy);
  EXPECT_EQ(reg.get(a.id)->kv, 7u);
  EXPECT_EQ(reg.get(a.id)->messages.size(), 1u);
  ASSERT_FALSE(reg.remove(a.id, &removed));
  EXPECT_EQ(removed.kv, 7u) << "the caller gets the KV handle to release";
  EXPECT_FALSE(reg.get(a.id));
  EXPECT_EQ(reg.remove(a.id, &removed)->status, 404);
}

// The server-wide text budget (issue 21): agents' text is counted through add, finish, remove and
// expiry, and growth past the budget is refused with the agent left as it was.
TEST(AgentRegistry, TextBudgetOverAllAgents) {
  AgentRegistry reg(10, 100);
  Agent a, b;
  a.messages = {ChatMessage{"user", std::string(60, 'x')}};
  ASSERT_FALSE(reg.add(&a));
  EXPECT_EQ(reg.text_bytes(), 60u);
  b.messages = {ChatMessage{"user", std::string(50, 'y')}};
  auto full = reg.add(&b);
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 429);
  EXPECT_NE(full->message.find("budget of 100 bytes"), std::string::npos) << full->message;
  b.messages[0].content.resize(40);
  ASSERT_FALSE(reg.add(&b));
  EXPECT_EQ(reg.text_bytes(), 100u);

  std::vector<Agent> got;
  ASSERT_FALSE(reg.acquire({a.id}, &got));
  got[0].messages.push_back(ChatMessage{"user", "z"});
  auto over = reg.finish_grown(got[0]);
  ASSERT_TRUE(over);
  EXPECT_EQ(over->status, 429);
  EXPECT_EQ(reg.get(a.id)->messages.size(), 1u) << "a refused append stores nothing";
  EXPECT_FALSE(reg.get(a.id)->busy);
  ASSERT_FALSE(reg.acquire({a.id}, &got));
  got[0].messages[0].content.resize(10);
  got[0].last_answer = "abcde";
  EXPECT_FALSE(reg.finish_grown(got[0]));
  EXPECT_EQ(reg.text_bytes(), 55u);
  Agent removed;
  ASSERT_FALSE(reg.remove(b.id, &removed));
  EXPECT_EQ(reg.text_bytes(), 15u);
  EXPECT_EQ(reg.take_expired(1e18).size(), 1u);
  EXPECT_EQ(reg.text_bytes(), 0u);
}

TEST(AgentRegistry, CapacityAndExpiry) {
  AgentRegistry reg(2);
  Agent a, b, c;
  a.expires_at = 100;
  b.expires_at = 200;
  ASSERT_FALSE(reg.add(&a));
  ASSERT_FALSE(reg.add(&b));
  EXPECT_EQ(reg.add(&c)->status, 429);
  std::vector<Agent> got;
  ASSERT_FALSE(reg.acquire({a.id}, &got));
  EXPECT_TRUE(reg.take_expired(150).empty()) << "a busy agent does not expire under its operation";
  reg.abandon(a.id);
  auto expired = reg.take_expired(150);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].id, a.id);
  EXPECT_EQ(reg.size(), 1u);
  EXPECT_EQ(reg.take_all().size(), 1u);
  EXPECT_EQ(reg.size(), 0u);
}

}  // namespace
}  // namespace agentkv
