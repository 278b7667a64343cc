// KILN_LOG (runtime/log.h): channel names and their bits, the warning for
// unknown names, the environment read once, and the off path, which must
// neither format nor evaluate a log line's arguments.
#include "runtime/log.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "common/log_capture.h"

namespace kiln {
namespace {

using logging::Channel;
using testutil::logOf;

uint32_t bits(std::initializer_list<Channel> channels) {
  uint32_t mask = 0;
  for (Channel c : channels) mask |= static_cast<uint32_t>(c);
  return mask;
}

TEST(Log, ParsesChannelNames) {
  EXPECT_EQ(logging::parseChannels(""), 0u);
  EXPECT_EQ(logging::parseChannels("passes"), bits({Channel::passes}));
  EXPECT_EQ(logging::parseChannels(" fusion , cache,"), bits({Channel::fusion, Channel::cache}));
  EXPECT_EQ(logging::parseChannels("codegen,recompiles"), bits({Channel::codegen, Channel::recompiles}));
  EXPECT_EQ(logging::parseChannels("all"),
            bits({Channel::passes, Channel::fusion, Channel::codegen, Channel::cache, Channel::recompiles}));
  EXPECT_EQ(logging::parseChannels("Passes"), 0u) << "names are lower case, as documented";
}

TEST(Log, UnknownNamesAreCollectedAndTheWarningNamesTheValidOnes) {
  std::string unknown;
  EXPECT_EQ(logging::parseChannels("pases,cache,kernels", &unknown), bits({Channel::cache}));
  EXPECT_EQ(unknown, "'pases', 'kernels'");
  EXPECT_EQ(logging::unknownChannelsWarning(unknown),
            "kiln: KILN_LOG names no channel 'pases', 'kernels'; the channels are passes, fusion, codegen, cache, "
            "recompiles, all");
}

TEST(Log, ConfigureWarnsOnceAboutUnknownNames) {
  testing::internal::CaptureStderr();
  logging::configure("nope, cache,nada");
  EXPECT_TRUE(logging::enabled(Channel::cache));
  EXPECT_FALSE(logging::enabled(Channel::passes));
  logging::configure("");
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "kiln: KILN_LOG names no channel 'nope', 'nada'; the channels are passes, fusion, codegen, cache, "
            "recompiles, all\n");
}

TEST(Log, TheEnvironmentIsReadWhenAsked) {
  ::setenv("KILN_LOG", "codegen", 1);
  logging::configure(nullptr);
  ::unsetenv("KILN_LOG");
  EXPECT_TRUE(logging::enabled(Channel::codegen));
  EXPECT_FALSE(logging::enabled(Channel::fusion));
  // Read once: the environment changing later changes nothing.
  EXPECT_TRUE(logging::enabled(Channel::codegen));
  logging::configure(nullptr);
  EXPECT_FALSE(logging::enabled(Channel::codegen));
}

/// A value whose formatting is observable: each format counts.
struct Observed {
  int* formats;
};

}  // namespace
}  // namespace kiln

template <>
struct fmt::formatter<kiln::Observed> : fmt::formatter<int> {
  auto format(const kiln::Observed& o, format_context& ctx) const {
    return fmt::formatter<int>::format(++*o.formats, ctx);
  }
};

namespace kiln {
namespace {

TEST(Log, OffNothingIsFormattedOrEvaluated) {
  int formats = 0, evaluated = 0;
  auto line = [&] { KILN_LOG_TO(passes, "pass {} of {}", Observed{&formats}, ++evaluated); };
  EXPECT_EQ(logOf("", line), "");
  EXPECT_EQ(logOf("fusion,cache", line), "") << "another channel on";
  EXPECT_EQ(formats, 0);
  EXPECT_EQ(evaluated, 0);
  EXPECT_EQ(logOf("passes", line), "pass 1 of 1\n");
  EXPECT_EQ(logOf("all", line), "pass 2 of 2\n");
  EXPECT_EQ(formats, 2);
}

TEST(Log, WriteEndsEachMessageWithOneNewline) {
  const std::string err = logOf("recompiles", [] {
    logging::write("one");
    logging::write("two\n");
    logging::write("three\nlines\n");
  });
  EXPECT_EQ(err, "one\ntwo\nthree\nlines\n");
}

}  // namespace
}  // namespace kiln
