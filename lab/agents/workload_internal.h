// Pieces the workload implementations share (private to lab/agents/): the round bookkeeping every
// workload enforces, reply cleaning, and the factories make_workload dispatches to.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "workload.h"

namespace agentkv {

// Enforces the harness protocol: round(r) once rounds 0..r-1 are recorded, record(r) for the round
// just produced, one reply per turn. Violations are harness bugs, so they abort with a message.
class RoundCursor {
 public:
  explicit RoundCursor(int n_rounds) : n_rounds_(n_rounds) {}
  void begin_round(int r);
  void end_round(int r, size_t n_replies, size_t n_turns);
  int recorded() const { return recorded_; }

 private:
  int n_rounds_;
  int produced_ = -1;
  int recorded_ = 0;
};

// What every workload holds: its name, its validated options and the round bookkeeping.
class WorkloadBase : public Workload {
 public:
  WorkloadBase(std::string name, const WorkloadOptions& opt)
      : opt_(opt), cursor_(opt.n_rounds), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  int n_agents() const override { return opt_.n_agents; }
  int n_rounds() const override { return opt_.n_rounds; }

 protected:
  WorkloadOptions opt_;
  RoundCursor cursor_;

 private:
  std::string name_;
};

// Makes a reply safe to quote: trims, keeps at most max_lines non-empty lines (the first one only
// by default), collapses runs of whitespace and control characters to one space, and stands in
// "(says nothing)" for an empty reply.
std::string clean_reply(std::string_view reply, int max_lines = 1);

// Factories behind make_workload; options arrive validated, with defaults filled in.
std::unique_ptr<Workload> make_generative_agents_workload(const WorkloadOptions& opt);
std::unique_ptr<Workload> make_agent_society_workload(const WorkloadOptions& opt);
std::unique_ptr<Workload> make_long_history_society_workload(const WorkloadOptions& opt);
std::unique_ptr<Workload> make_debate_workload(const WorkloadOptions& opt);
std::unique_ptr<Workload> make_chain_workload(const WorkloadOptions& opt);

}  // namespace agentkv
