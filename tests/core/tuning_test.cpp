// The tuning registry (core/tuning.h): each knob is read from the environment once, a bad value
// is an Error naming the variable at every read, the typed knobs' parsing, and ScopedOverride
// (checked like the environment, restored when it ends, also to "not read yet").
#include "core/tuning.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace jitllm::tuning {
namespace {

// Knobs of a registry of the test's own (not in registries()): names no one else reads.
struct TestKnobs {
  Registry registry{"test"};
  Flag flag{registry, "JITLLM_TEST_TUNING_FLAG", false, "a flag"};
  Number number{registry, "JITLLM_TEST_TUNING_NUMBER", 8, 1, 64, "a number"};
  Number pow2{registry, "JITLLM_TEST_TUNING_POW2", 4, {1, 2, 4, 8}, "a number from a list"};
  Choice choice{registry, "JITLLM_TEST_TUNING_CHOICE", "b", {"a", "b", "all"}, "a word"};
  Text text{registry, "JITLLM_TEST_TUNING_TEXT", "x", "x or empty",
            [](const std::string& v) { return v == "x" ? std::optional<int>(1) : v.empty() ? std::optional<int>(0) : std::nullopt; },
            "free text"};
};

std::string error_of(const Knob& k) {
  try {
    (void)k.text();
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

TEST(Tuning, DefaultsWhenUnsetOrEmpty) {
  unsetenv("JITLLM_TEST_TUNING_FLAG");
  setenv("JITLLM_TEST_TUNING_NUMBER", "", 1);
  const TestKnobs k;
  EXPECT_FALSE(k.flag.on());
  EXPECT_FALSE(k.flag.is_set());
  EXPECT_EQ(k.number.get(), 8);
  EXPECT_TRUE(k.number.is_set());
  EXPECT_EQ(k.number.text(), "8");
  EXPECT_EQ(k.pow2.get(), 4);
  EXPECT_TRUE(k.choice.is("b"));
  EXPECT_EQ(k.choice.number(), 1);
  EXPECT_EQ(k.text.number(), 1);
  EXPECT_EQ(k.registry.knobs().size(), 5u);
  unsetenv("JITLLM_TEST_TUNING_NUMBER");
}

TEST(Tuning, ReadOnceAtFirstUse) {
  setenv("JITLLM_TEST_TUNING_NUMBER", "16", 1);
  const TestKnobs k;
  setenv("JITLLM_TEST_TUNING_NUMBER", "32", 1);  // before the first use: seen
  EXPECT_EQ(k.number.get(), 32);
  setenv("JITLLM_TEST_TUNING_NUMBER", "48", 1);  // after it: not seen
  EXPECT_EQ(k.number.get(), 32);
  unsetenv("JITLLM_TEST_TUNING_NUMBER");
}

TEST(Tuning, BadValuesAreErrorsNamingTheVariable) {
  setenv("JITLLM_TEST_TUNING_FLAG", "yes", 1);
  setenv("JITLLM_TEST_TUNING_NUMBER", "65", 1);
  setenv("JITLLM_TEST_TUNING_POW2", "3", 1);
  setenv("JITLLM_TEST_TUNING_CHOICE", "c", 1);
  setenv("JITLLM_TEST_TUNING_TEXT", "y", 1);
  const TestKnobs k;
  EXPECT_EQ(error_of(k.flag), "JITLLM_TEST_TUNING_FLAG: 'yes' is not 0 or 1");
  EXPECT_EQ(error_of(k.flag), "JITLLM_TEST_TUNING_FLAG: 'yes' is not 0 or 1");  // every read
  EXPECT_THROW(k.flag.on(), Error);
  EXPECT_EQ(error_of(k.number), "JITLLM_TEST_TUNING_NUMBER: '65' is not an integer in 1..64");
  EXPECT_EQ(error_of(k.pow2), "JITLLM_TEST_TUNING_POW2: '3' is not 1, 2, 4 or 8");
  EXPECT_EQ(error_of(k.choice), "JITLLM_TEST_TUNING_CHOICE: 'c' is not one of a, b or all");
  EXPECT_EQ(error_of(k.text), "JITLLM_TEST_TUNING_TEXT: 'y' is not x or empty");
  for (const char* bad : {"8x", " 8", "+8", "0x8", "1e1"}) {
    setenv("JITLLM_TEST_TUNING_NUMBER", bad, 1);
    const TestKnobs again;
    EXPECT_NE(error_of(again.number), "") << bad;
  }
  for (const char* v : {"JITLLM_TEST_TUNING_FLAG", "JITLLM_TEST_TUNING_NUMBER", "JITLLM_TEST_TUNING_POW2",
                        "JITLLM_TEST_TUNING_CHOICE", "JITLLM_TEST_TUNING_TEXT"})
    unsetenv(v);
}

TEST(Tuning, TextKnobsTakeTheEmptyValue) {
  setenv("JITLLM_TEST_TUNING_TEXT", "", 1);
  const TestKnobs k;
  EXPECT_EQ(k.text.text(), "");
  EXPECT_EQ(k.text.number(), 0);
  EXPECT_TRUE(k.text.is_set());
  unsetenv("JITLLM_TEST_TUNING_TEXT");
}

TEST(Tuning, ScopedOverrideIsCheckedAndRestored) {
  const Knob& pin = find("JITLLM_PIN");
  EXPECT_EQ(&pin, &core_knobs().pin);
  const bool before = core_knobs().pin.on();
  {
    ScopedOverride off("JITLLM_PIN", before ? "0" : "1");
    EXPECT_EQ(core_knobs().pin.on(), !before);
    {
      ScopedOverride inner("JITLLM_PIN", before ? "1" : "0");
      EXPECT_EQ(core_knobs().pin.on(), before);
    }
    EXPECT_EQ(core_knobs().pin.on(), !before);
    EXPECT_THROW(ScopedOverride("JITLLM_PIN", "2"), Error);  // checked like the environment
    EXPECT_EQ(core_knobs().pin.on(), !before);
  }
  EXPECT_EQ(core_knobs().pin.on(), before);
  EXPECT_THROW(ScopedOverride("JITLLM_NO_SUCH_KNOB", "1"), Error);
}

TEST(Tuning, CoreRegistryComesFirst) {
  const auto all = registries();
  ASSERT_FALSE(all.empty());
  EXPECT_STREQ(all[0]->name(), "core");
  for (const char* name : {"JITLLM_CORES", "JITLLM_PIN", "JITLLM_LOG", "JITLLM_NOHUGE", "JITLLM_DUMP"}) {
    const Knob& k = find(name);
    EXPECT_NE(std::string(k.doc()), "") << name;
    EXPECT_NE(k.allowed(), "") << name;
  }
}

}  // namespace
}  // namespace jitllm::tuning
