// fusekit::units: widths and cuts count characters shown, not UTF-8 bytes; tables align on them.
#include "fusekit/units.hpp"

#include <gtest/gtest.h>

namespace fusekit::units {
namespace {

TEST(Units, DisplayWidthCountsCharactersNotBytes) {
  EXPECT_EQ(display_width("abc"), 3u);
  EXPECT_EQ(display_width("152.1 µs"), 8u);  // µ is two bytes
  EXPECT_EQ(display_width("a → b × c"), 9u);  // → and × are three and two bytes
  EXPECT_EQ(display_width(""), 0u);
}

TEST(Units, ClipCutsOnCharactersAndMarksTheCut) {
  EXPECT_EQ(clip("kernel", 6), "kernel");  // fits: whole
  EXPECT_EQ(clip("kernel", 4), "ker…");
  EXPECT_EQ(clip("µ→×abc", 3), "µ→…");      // never splits a multi-byte character
  EXPECT_EQ(display_width(clip("µ→×abc", 3)), 3u);
  EXPECT_EQ(clip("anything", 0), "anything");  // width 0: no limit
}

TEST(Units, TableTextAlignsOnShownWidth) {
  const std::string text = table_text({{"op", "time"}, {"µ-kernel", "1 µs"}, {"k", "10 ms"}}, 1);
  EXPECT_EQ(text,
            "  op         time\n"
            "  µ-kernel   1 µs\n"
            "  k         10 ms\n");
}

}  // namespace
}  // namespace fusekit::units
