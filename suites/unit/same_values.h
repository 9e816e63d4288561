// A check for ops whose outputs are selected or passed through, not computed: equal values with
// equal signs (-0 differs from +0), and NaN where NaN is expected.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace d9m::test {

inline void expect_same_values(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " [" << i << "] = " << got[i];
      continue;
    }
    EXPECT_EQ(got[i], want[i]) << what << " [" << i << "]";
    EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i])) << what << " [" << i << "]: the sign of " << got[i];
  }
}

}  // namespace d9m::test
