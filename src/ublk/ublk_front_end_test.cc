// ublk_front_end_test.cc: what the ublk front end does without the
// driver (this host has none): a missing control device is a clear error,
// and the registry is left without a watcher.
#include "ublk/ublk_front_end.h"

#include <gtest/gtest.h>

#include "testing/test_util.h"

namespace ztier::ublk {
namespace {

TEST(UblkFrontEndTest, MissingControlDeviceIsAClearError) {
  DeviceRegistry registry(DeviceDefaults{});
  auto d = registry.Add("zram0");
  ASSERT_TRUE(d.has_value());
  ASSERT_OK((*d)->SetDisksize(1 << 20));
  UblkFrontEndOptions o;
  o.control_path = "/nonexistent/ublk-control";
  auto fe = UblkFrontEnd::Start(&registry, o);
  ASSERT_FALSE(fe.has_value());
  if (platform::UblkBuilt()) {
    EXPECT_EQ(fe.error().code(), StatusCode::kNotFound);
    EXPECT_NE(fe.error().message().find(
                  "this kernel has no ublk (modprobe ublk_drv)"),
              std::string::npos)
        << fe.error().message();
  } else {
    EXPECT_EQ(fe.error().code(), StatusCode::kUnsupported);
  }
  // Nothing watches: reset and removal work as without ublk.
  ASSERT_OK((*d)->Reset());
  ASSERT_OK(registry.Remove("zram0"));
}

}  // namespace
}  // namespace ztier::ublk
