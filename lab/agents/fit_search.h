// The searches bench-agents' --find-fit runs (bench_agents.cpp): the largest agent count whose run
// holds, given that it holds up to some count and not beyond. Each trial is a whole workload run, so the
// searches keep the number of trials small.
#pragma once

#include <algorithm>

#include "util/status.h"

namespace agentkv {

// The largest n in [lo, hi] where `holds` is true, given that it holds at lo and, once false, stays
// false for larger n: doubling from lo, then bisecting between the last n that held and the first that
// did not.
template <class Holds>
Result<int> largest_where(int lo, int hi, Holds&& holds) {
  int good = lo, bad = hi + 1;
  while (good < hi) {
    const int next = std::min(hi, good * 2);
    bool ok = false;
    AGENTKV_ASSIGN_OR_RETURN(ok, holds(next));
    if (!ok) {
      bad = next;
      break;
    }
    good = next;
  }
  while (bad - good > 1) {
    const int mid = good + (bad - good) / 2;
    bool ok = false;
    AGENTKV_ASSIGN_OR_RETURN(ok, holds(mid));
    (ok ? good : bad) = mid;
  }
  return good;
}

// The same from a guess `start` in [lo, hi]: steps of an eighth up from it while it holds (down while it
// does not), then bisects between the last n that held and the first that did not. lo - 1 when none does.
// Fewer trials than doubling from lo when the guess is close (e.g. the count computed from final contexts).
template <class Holds>
Result<int> largest_where_from(int lo, int hi, int start, Holds&& holds) {
  start = std::clamp(start, lo, hi);
  const auto step = [](int n) { return std::max(1, n / 8); };
  bool ok = false;
  AGENTKV_ASSIGN_OR_RETURN(ok, holds(start));
  int good = lo - 1, bad = hi + 1;
  if (ok) {
    for (good = start; good < hi;) {
      const int next = std::min(hi, good + step(good));
      AGENTKV_ASSIGN_OR_RETURN(ok, holds(next));
      if (!ok) {
        bad = next;
        break;
      }
      good = next;
    }
  } else {
    for (bad = start; bad > lo;) {
      const int next = std::max(lo, bad - step(bad));
      AGENTKV_ASSIGN_OR_RETURN(ok, holds(next));
      if (ok) {
        good = next;
        break;
      }
      bad = next;
    }
    if (good < lo) return lo - 1;
  }
  while (bad - good > 1) {
    const int mid = good + (bad - good) / 2;
    AGENTKV_ASSIGN_OR_RETURN(ok, holds(mid));
    (ok ? good : bad) = mid;
  }
  return good;
}

}  // namespace agentkv
