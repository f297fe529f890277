// Chat contexts in the segment store (kv/segment_store.h), in master–diff form where they were
// blended (engine/compact_context.h; EngineOptions::chat_compact): how a finished chat request's
// context is stored, and how a later request of the same conversation resumes one (engine/chat_sharing.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "engine/compact_context.h"
#include "engine/engine.h"

namespace agentkv {

// The dense context to resume from: a fork of the stored one, or its expansion when it is compact
// (bit-identical to the dense copy it replaced; least recently used stored contexts are evicted first
// when the pool is short). nullopt when the pool cannot hold the expansion: resume less.
std::optional<KvSequence> resume_stored_context(Engine& e, const SegmentStore::PrefixHit& hit);

// The master to blend a hit's slots [begin, end) from: its context, or the context's expansion when
// they lie in its holes (a compact context: a dense copy made now, bit-identical to the one it
// replaced; least recently used stored contexts are evicted first when the pool is short). nullptr
// when the pool cannot hold the expansion.
std::shared_ptr<const KvSequence> master_for(Engine& e, const SegmentStore::Hit& hit, int64_t begin, int64_t end);

// Stores a finished chat context with its segments. With chat_original_masters, the whole blocks of its
// blended runs (and of those it resumed) serve no master; with chat_compact on, the blocks inside its
// blended `runs` (those blended from a stored context, not from an expansion) are dropped for master + diff, and the diffs of a compact context it resumed (`resumed`,
// the first `resumed_tokens` tokens of which it continues) carry over as they are. A compaction the pool
// cannot hold stores the context dense.
void store_chat_context(Engine& e, std::shared_ptr<const KvSequence> ctx,
                        std::span<const std::pair<int64_t, int64_t>> segments, const std::vector<BlendedRun>& runs,
                        const SegmentStore::PrefixHit& resumed, int64_t resumed_tokens);

}  // namespace agentkv
