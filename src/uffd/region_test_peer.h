// region_test_peer.h: what region tests may do that the public API does not
// offer: create a Region whose userfaultfd is wrapped (a FaultyUserfaultfd),
// to reach the error paths of the fault handler and of eviction, and reach
// the fault handler's mutex. For tests only; the Region behaves as one from
// Region::Create otherwise.
#ifndef ZTIER_UFFD_REGION_TEST_PEER_H_
#define ZTIER_UFFD_REGION_TEST_PEER_H_

#include <memory>
#include <mutex>
#include <utility>

#include "platform/faulty_userfaultfd.h"
#include "region_impl.h"
#include "ztier/region.h"

namespace ztier {

class RegionTestPeer {
 public:
  // Region::Create, with the userfaultfd wrapped in a FaultyUserfaultfd
  // that asks `fault` before each call. Errors as Region::Create's.
  static Result<std::unique_ptr<Region>> CreateFaulty(
      const RegionOptions& options, internal::UffdFault fault) {
    std::unique_ptr<Region> region(new Region());
    ZT_RETURN_IF_ERROR(region->impl_->Init(
        options, [&](std::unique_ptr<internal::Userfaultfd> real) {
          return std::make_unique<internal::FaultyUserfaultfd>(
              std::move(real), std::move(fault));
        }));
    return region;
  }

  // The handler's mutex: it holds it for each batch of faults it resolves
  // and the reclaim that follows the batch.
  static std::mutex& HandlerMutex(const Region& r) { return r.impl_->mu; }
};

}  // namespace ztier

#endif  // ZTIER_UFFD_REGION_TEST_PEER_H_
