// Tests of the real Userfaultfd (platform/userfaultfd.h) on a registered
// mapping, and of FaultyUserfaultfd around it: injected failures stop the
// call before the kernel and say so; everything else passes through.
#include "platform/userfaultfd.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "platform/faulty_userfaultfd.h"
#include "testing/test_util.h"
#include "ztier/page.h"

namespace ztier::internal {
namespace {

constexpr std::size_t kPages = 4;

class UserfaultfdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto u = OpenUserfaultfd();
    if (!u.has_value()) GTEST_SKIP() << u.error().ToString();
    mem_ = ::mmap(nullptr, kPages * kPageSize, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem_, MAP_FAILED);
    calls_.clear();
    uffd_ = std::make_unique<FaultyUserfaultfd>(
        std::move(*u), [this](const UffdCall& c) {
          calls_.push_back(c);
          return c.op == fail_ ? err_ : 0;
        });
    ASSERT_OK(uffd_->Register(mem_, kPages * kPageSize));
  }
  void TearDown() override {
    if (uffd_ != nullptr) {
      fail_ = UffdCall::kReadEvents;
      err_ = 0;
      Status st = uffd_->Unregister(mem_, kPages * kPageSize);
      st.IgnoreError();
    }
    if (mem_ != nullptr && mem_ != MAP_FAILED) {
      ::munmap(mem_, kPages * kPageSize);
    }
  }
  std::uintptr_t Page(std::size_t i) const {
    return reinterpret_cast<std::uintptr_t>(mem_) + i * kPageSize;
  }

  void* mem_ = nullptr;
  std::unique_ptr<Userfaultfd> uffd_;
  UffdCall::Op fail_ = UffdCall::kReadEvents;
  int err_ = 0;
  std::vector<UffdCall> calls_;
};

TEST_F(UserfaultfdTest, CopyMapsThePagesAndAnAlreadyMappedPageCountsAsDone) {
  std::vector<std::byte> src(2 * kPageSize, std::byte{0x5A});
  std::size_t done = 0;
  ASSERT_OK(uffd_->Copy(Page(0), src.data(), 2 * kPageSize, false, &done));
  EXPECT_EQ(done, 2 * kPageSize);
  EXPECT_EQ(static_cast<std::byte*>(mem_)[kPageSize + 7], std::byte{0x5A});
  // Over page 1 (mapped: EEXIST, taken as done) and page 2 (missing).
  done = 0;
  ASSERT_OK(uffd_->Copy(Page(1), src.data(), 2 * kPageSize, false, &done));
  EXPECT_EQ(done, 2 * kPageSize);
  EXPECT_EQ(static_cast<std::byte*>(mem_)[2 * kPageSize], std::byte{0x5A});
  ASSERT_OK(uffd_->ZeroPage(Page(3), kPageSize, &done));
  EXPECT_EQ(done, kPageSize);
  EXPECT_EQ(static_cast<std::byte*>(mem_)[3 * kPageSize], std::byte{0});
  ASSERT_OK(uffd_->WriteProtect(Page(0), kPageSize, true));
  ASSERT_OK(uffd_->WriteProtect(Page(0), kPageSize, false));
  // No fault is pending.
  uffd_msg msgs[4];
  auto got = uffd_->ReadEvents(msgs, 4);
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  EXPECT_EQ(*got, 0u);
  // The wrapper saw each call, with its range.
  ASSERT_GE(calls_.size(), 2u);
  EXPECT_EQ(calls_[0].op, UffdCall::kRegister);
  EXPECT_EQ(calls_[1].op, UffdCall::kCopy);
  EXPECT_EQ(calls_[1].start, Page(0));
  EXPECT_EQ(calls_[1].len, 2 * kPageSize);
}

TEST_F(UserfaultfdTest, InjectedFailuresStopBeforeTheKernel) {
  std::vector<std::byte> src(kPageSize, std::byte{1});
  fail_ = UffdCall::kCopy;
  err_ = ENOMEM;
  std::size_t done = 99;
  Status st = uffd_->Copy(Page(0), src.data(), kPageSize, false, &done);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(done, 0u);
  EXPECT_NE(st.message().find("UFFDIO_COPY"), std::string::npos);
  EXPECT_NE(st.message().find("(injected)"), std::string::npos);
  EXPECT_NE(st.message().find(std::strerror(ENOMEM)), std::string::npos);
  // Nothing was mapped: a real copy afterwards maps the page.
  fail_ = UffdCall::kReadEvents;
  ASSERT_OK(uffd_->Copy(Page(0), src.data(), kPageSize, false, &done));
  EXPECT_EQ(done, kPageSize);
  fail_ = UffdCall::kReadEvents;
  err_ = EBADF;
  uffd_msg msgs[1];
  auto got = uffd_->ReadEvents(msgs, 1);
  ASSERT_FALSE(got.has_value());
  EXPECT_NE(got.error().message().find("read userfaultfd"), std::string::npos);
}

}  // namespace
}  // namespace ztier::internal
