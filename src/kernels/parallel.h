/*!
 * \file kernels/parallel.h
 * \brief A small parallel-for over a persistent worker pool, shared by the kernels.
 *
 * The emulator's kernels split their outermost independent loop (rows, planes, output tiles)
 * into contiguous chunks with ParallelFor. Work below a grain runs inline on the caller, so tiny
 * ops never pay a thread hand-off. The pool is safe to use from several threads at once: a caller
 * that finds the pool busy (another Run() in flight, or a nested ParallelFor inside a chunk) runs
 * its loop inline instead of waiting, so concurrent calls never deadlock or oversubscribe.
 */
#ifndef EXAMPLE_NPU_KERNELS_PARALLEL_H_
#define EXAMPLE_NPU_KERNELS_PARALLEL_H_

#include <cstdint>
#include <functional>

namespace example_npu {
namespace kernels {

/*! \brief Threads a ParallelFor may use, caller included: hardware_concurrency capped at 8. */
int MaxThreads();

/*!
 * \brief Contiguous chunk `index` of `chunks` near-equal chunks of [0, n): the first n % chunks
 * chunks get one extra item. Exposed for tests; ParallelFor uses it.
 */
void ChunkBounds(int64_t n, int64_t chunks, int64_t index, int64_t* begin, int64_t* end);

/*!
 * \brief Runs fn(begin, end) over disjoint contiguous chunks covering [0, n), possibly on several
 * threads, and returns when all chunks are done. Chunks hold at least `grain` items (so
 * n < 2 * grain runs inline as fn(0, n)); there are at most chunks_per_thread * MaxThreads() of
 * them. Threads claim chunks dynamically, so more chunks than threads balance uneven work and a
 * worker that is slow to wake (busy machine) costs only the chunks it actually took; kernels whose
 * chunks carry set-up cost (operand packing) pass chunks_per_thread = 1. An exception thrown by
 * fn is rethrown to the caller after every chunk has finished.
 */
template <typename Fn>
void ParallelFor(int64_t n, int64_t grain, const Fn& fn, int chunks_per_thread = 4);

/*! \brief How many chunks ParallelFor splits [0, n) into (1 with one thread: fn(0, n) inline). */
int64_t ParallelChunks(int64_t n, int64_t grain, int chunks_per_thread);

/*!
 * \brief ParallelFor's hand-off: fn over `chunks` chunks of [0, n) on the pool and the caller;
 * false, with nothing run, when the caller is a worker or the pool is busy.
 */
bool RunOnPool(int64_t n, int64_t chunks, const std::function<void(int64_t, int64_t)>& fn);

template <typename Fn>
void ParallelFor(int64_t n, int64_t grain, const Fn& fn, int chunks_per_thread) {
  if (n <= 0) return;
  // Work run inline builds no std::function: most kernels' lambdas capture more than its small
  // buffer holds, and every tile paid a heap allocation for it.
  const int64_t chunks = ParallelChunks(n, grain, chunks_per_thread);
  if (chunks <= 1 || !RunOnPool(n, chunks, fn)) fn(0, n);
}

}  // namespace kernels
}  // namespace example_npu

#endif  // EXAMPLE_NPU_KERNELS_PARALLEL_H_
