// testing/nothing_stored.h: the check that a store (or a device) whose
// every page was discarded counts nothing stored.
//
//   for (std::size_t i = 0; i < n; ++i) ASSERT_OK(store.Discard(i));
//   ztier::testing::ExpectNothingStored(store.Stats());
//
// Every count of pages, objects and their bytes must be back to 0:
// stored, same-filled, huge, incompressible and written-back pages, the
// original and compressed sizes, units and their pages, and the objects
// of every dictionary and every codec priority. Memory is not checked:
// mem_used_total keeps the pool's own tables and its spare zspages
// (page_store.h), which each test bounds as it needs.
#ifndef ZTIER_TESTING_NOTHING_STORED_H_
#define ZTIER_TESTING_NOTHING_STORED_H_

#include <cstddef>

#include <gtest/gtest.h>

#include "ztier/page_store.h"

namespace ztier::testing {

inline void ExpectNothingStored(const PageStoreStats& st) {
  EXPECT_EQ(st.stored_pages, 0u);
  EXPECT_EQ(st.orig_data_size, 0u);
  EXPECT_EQ(st.compr_data_size, 0u);
  EXPECT_EQ(st.same_pages, 0u);
  EXPECT_EQ(st.huge_pages, 0u);
  EXPECT_EQ(st.incompressible_pages, 0u);
  EXPECT_EQ(st.bd_count, 0u);
  EXPECT_EQ(st.units, 0u);
  EXPECT_EQ(st.unit_pages, 0u);
  for (std::size_t d = 0; d < st.dict_pages.size(); ++d) {
    EXPECT_EQ(st.dict_pages[d], 0u) << "dictionary " << d;
  }
  for (std::size_t p = 0; p < st.priority_pages.size(); ++p) {
    EXPECT_EQ(st.priority_pages[p], 0u) << "priority " << p;
  }
}

}  // namespace ztier::testing

#endif  // ZTIER_TESTING_NOTHING_STORED_H_
