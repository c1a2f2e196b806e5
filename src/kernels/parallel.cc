/*!
 * \file kernels/parallel.cc
 * \brief The worker pool behind ParallelFor.
 *
 * One job runs at a time. Its state is a single atomic "ticket" word holding the job generation,
 * its chunk count and the next unclaimed chunk, so a worker that wakes late can never claim a
 * chunk of a newer job with the old job's function: a claim is a compare-and-swap that also
 * checks the generation. After a job, workers spin briefly before sleeping so that the next op of
 * a graph (typically microseconds later) does not pay a futex wake-up.
 */
#include "kernels/parallel.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace example_npu {
namespace kernels {
namespace {

constexpr int kMaxThreadsCap = 8;
// How long an idle worker polls for the next job before it blocks on the condition variable.
constexpr auto kSpinTime = std::chrono::microseconds(300);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Ticket layout: generation in bits 16.., chunk count in bits 8..15, next chunk in bits 0..7.
constexpr uint64_t kGenShift = 16;
inline uint64_t Generation(uint64_t t) { return t >> kGenShift; }
inline int64_t Chunks(uint64_t t) { return static_cast<int64_t>((t >> 8) & 0xff); }
inline int64_t NextChunk(uint64_t t) { return static_cast<int64_t>(t & 0xff); }
constexpr int64_t kMaxChunks = 0xff;

/*! \brief Set on pool workers so a ParallelFor nested inside a chunk runs inline. */
thread_local bool tls_in_worker = false;

class Pool {
 public:
  explicit Pool(int workers) : owner_pid_(getpid()) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { WorkerLoop(); });
  }

  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    // In a forked child the threads do not exist; joining them would hang.
    const bool owner = getpid() == owner_pid_;
    for (std::thread& t : threads_) owner ? t.join() : t.detach();
  }

  /*! \brief Runs the job if the pool is free (returns false, doing nothing, if it is busy). */
  bool TryRun(int64_t n, int64_t chunks, const std::function<void(int64_t, int64_t)>& fn) {
    if (getpid() != owner_pid_ || busy_.exchange(true, std::memory_order_acquire)) return false;
    fn_ = &fn;
    n_ = n;
    error_ = nullptr;
    pending_.store(static_cast<int>(chunks), std::memory_order_relaxed);
    const uint64_t gen = Generation(ticket_.load(std::memory_order_relaxed)) + 1;
    {
      // Publishing under the mutex pairs with the sleepers' predicate check (no lost wake-up).
      std::lock_guard<std::mutex> lock(mu_);
      ticket_.store(gen << kGenShift | static_cast<uint64_t>(chunks) << 8,
                    std::memory_order_release);
    }
    if (sleepers_.load(std::memory_order_relaxed) > 0) cv_.notify_all();
    RunChunks(gen);
    // Chunks still running belong to workers. Spin briefly (they usually finish within
    // microseconds), then sleep: if a worker was descheduled on a busy machine, this core going
    // idle lets the scheduler move that worker here instead of both waiting out a time slice.
    for (int spins = 0; spins < 2048 && pending_.load(std::memory_order_acquire) != 0; ++spins) {
      CpuRelax();
    }
    if (pending_.load(std::memory_order_acquire) != 0) {
      std::unique_lock<std::mutex> lock(done_mu_);
      done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
    std::exception_ptr error = error_;
    busy_.store(false, std::memory_order_release);
    if (error) std::rethrow_exception(error);
    return true;
  }

 private:
  /*! \brief Claims and runs chunks of generation `gen` until none is left. */
  void RunChunks(uint64_t gen) {
    uint64_t t = ticket_.load(std::memory_order_acquire);
    while (Generation(t) == gen && NextChunk(t) < Chunks(t)) {
      if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
      // The claimed chunk is pending, so the job's fields cannot change under us.
      int64_t begin = 0;
      int64_t end = 0;
      ChunkBounds(n_, Chunks(t), NextChunk(t), &begin, &end);
      try {
        (*fn_)(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu_);
        if (!error_) error_ = std::current_exception();
      }
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        // Last chunk: wake the caller if it went to sleep (the mutex orders this after its check).
        std::lock_guard<std::mutex> lock(done_mu_);
        done_cv_.notify_one();
      }
      t = ticket_.load(std::memory_order_acquire);
    }
  }

  void WorkerLoop() {
    tls_in_worker = true;
    uint64_t seen = 0;
    while (true) {
      // Poll for a new generation for a while, then sleep until one is published.
      auto deadline = std::chrono::steady_clock::now() + kSpinTime;
      uint64_t gen = Generation(ticket_.load(std::memory_order_acquire));
      for (int i = 0; gen == seen; ++i) {
        CpuRelax();
        if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) break;
        gen = Generation(ticket_.load(std::memory_order_acquire));
      }
      if (gen == seen) {
        std::unique_lock<std::mutex> lock(mu_);
        sleepers_.fetch_add(1, std::memory_order_relaxed);
        cv_.wait(lock, [&] {
          return stop_ || Generation(ticket_.load(std::memory_order_acquire)) != seen;
        });
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
        if (stop_) return;
        gen = Generation(ticket_.load(std::memory_order_acquire));
      }
      seen = gen;
      RunChunks(gen);
    }
  }

  const pid_t owner_pid_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                // guarded by mu_
  std::atomic<int> sleepers_{0};     // workers blocked on cv_
  std::atomic<bool> busy_{false};    // a job is in flight
  std::atomic<uint64_t> ticket_{0};  // generation | chunks | next chunk
  std::atomic<int> pending_{0};      // chunks of the current job not yet finished
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;  // current job, set while busy_
  int64_t n_ = 0;
  std::mutex done_mu_;  // with done_cv_: the caller sleeping until pending_ == 0
  std::condition_variable done_cv_;
  std::mutex error_mu_;
  std::exception_ptr error_;  // first exception of the current job
};

int ReadMaxThreads() {
  int n = static_cast<int>(std::thread::hardware_concurrency());
  // EXAMPLE_NPU_NUM_THREADS lowers (or raises, up to the cap) the thread count, e.g. to 1.
  if (const char* env = std::getenv("EXAMPLE_NPU_NUM_THREADS")) n = std::atoi(env);
  return std::clamp(n, 1, kMaxThreadsCap);
}

Pool& GetPool() {
  static Pool pool(MaxThreads() - 1);
  return pool;
}

}  // namespace

int MaxThreads() {
  static const int max_threads = ReadMaxThreads();
  return max_threads;
}

void ChunkBounds(int64_t n, int64_t chunks, int64_t index, int64_t* begin, int64_t* end) {
  const int64_t base = n / chunks;
  const int64_t extra = n % chunks;
  *begin = index * base + std::min(index, extra);
  *end = *begin + base + (index < extra ? 1 : 0);
}

int64_t ParallelChunks(int64_t n, int64_t grain, int chunks_per_thread) {
  if (MaxThreads() == 1) return 1;
  const int64_t max_chunks =
      std::clamp<int64_t>(int64_t{chunks_per_thread} * MaxThreads(), 1, kMaxChunks);
  return std::min(max_chunks, n / std::max<int64_t>(grain, 1));
}

bool RunOnPool(int64_t n, int64_t chunks, const std::function<void(int64_t, int64_t)>& fn) {
  return !tls_in_worker && GetPool().TryRun(n, chunks, fn);
}

}  // namespace kernels
}  // namespace example_npu
