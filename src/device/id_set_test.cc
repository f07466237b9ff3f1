#include "id_set.h"

#include <gtest/gtest.h>

namespace ztier {
namespace {

TEST(IdSetTest, TakesTheLowestFreeIdWhateverWasTakenOrGivenBack) {
  IdSet ids;
  ids.Take(1);
  ids.Take(3);
  ids.Take(4);
  EXPECT_EQ(ids.TakeLowest(), 0);
  EXPECT_EQ(ids.TakeLowest(), 2);
  EXPECT_EQ(ids.TakeLowest(), 5);  // past 3 and 4
  ids.GiveBack(3);
  ids.GiveBack(1);
  EXPECT_EQ(ids.TakeLowest(), 1);
  EXPECT_EQ(ids.TakeLowest(), 3);
  ids.Take(6);
  ids.Take(8);
  EXPECT_EQ(ids.TakeLowest(), 7);
  ids.GiveBack(8);
  EXPECT_EQ(ids.TakeLowest(), 8);
  EXPECT_EQ(ids.TakeLowest(), 9);
}

// The last id is handed out like any other, and none once it is in use.
TEST(IdSetTest, HandsOutTheLastIdToo) {
  IdSet ids(3);
  EXPECT_EQ(ids.TakeLowest(), 0);
  EXPECT_EQ(ids.TakeLowest(), 1);
  EXPECT_EQ(ids.TakeLowest(), 2);
  EXPECT_EQ(ids.TakeLowest(), 3);
  EXPECT_EQ(ids.TakeLowest(), std::nullopt);
  ids.GiveBack(1);
  EXPECT_EQ(ids.TakeLowest(), 1);
  EXPECT_EQ(ids.TakeLowest(), std::nullopt);
}

// The last id taken by name, skipped, then given back: free again.
TEST(IdSetTest, TheLastIdTakenByNameComesBack) {
  IdSet ids(3);
  ids.Take(3);
  EXPECT_EQ(ids.TakeLowest(), 0);
  EXPECT_EQ(ids.TakeLowest(), 1);
  EXPECT_EQ(ids.TakeLowest(), 2);
  EXPECT_EQ(ids.TakeLowest(), std::nullopt);
  ids.GiveBack(3);
  EXPECT_EQ(ids.TakeLowest(), 3);
  EXPECT_EQ(ids.TakeLowest(), std::nullopt);
}

}  // namespace
}  // namespace ztier
