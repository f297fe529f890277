// An agent's conversation as prompt tokens: the server's name for the turn's piece tokenization,
// which lives with the collective round it serves (share/turn_pieces.h) so that the round job, the
// start-up quality gate and the benchmark tokenize turns the one same way.
#pragma once

#include "share/turn_pieces.h"
