// The cost model behind per-call hang limits and the long stage's plan: it scales the
// largest measured calls up by work, never learns from calls too short to time, and never lets a
// cheap call of larger dense work (a masked or padded problem) pull a prediction down.
#include "attest/kernels/cost_model.h"

#include <gtest/gtest.h>

namespace attest {
namespace {

TEST(CostModel, ScalesTheLargestMeasuredCallsLinearly) {
  CostModel model(0.02);
  EXPECT_FALSE(model.predict(1e6));  // nothing measured: no prediction
  model.record(1e6, 0.1);
  model.record(4e6, 0.5);
  EXPECT_NEAR(*model.predict(16e6), 2.0, 1e-12);  // from the 4e6 call: the slower per work of the two
  EXPECT_NEAR(*model.predict(4e6), 0.5, 1e-12);
  EXPECT_NEAR(*model.predict(2e6), 0.2, 1e-12);  // only calls at or below the size predict it
  EXPECT_FALSE(model.predict(1e5));              // below every measured call: unknown, not guessed
}

TEST(CostModel, IgnoresCallsTooShortToTimeAndKeepsTheSlowerRepeat) {
  CostModel model(0.02);
  model.record(1e3, 0.001);  // fixed overhead and timer noise: scaled by work it would predict absurd times
  EXPECT_FALSE(model.predict(1e9));
  model.record(1e6, 0.05);
  model.record(1e6, 0.08);  // the same size again, slower (a busier moment): the slower one counts
  EXPECT_NEAR(*model.predict(2e6), 0.16, 1e-12);
}

TEST(CostModel, ACheapCallOfLargerWorkDoesNotLowerAPrediction) {
  CostModel model(0.02);
  model.record(1e6, 0.1);
  model.record(1e9, 0.03);  // dense work of a mostly masked problem, answered at once
  EXPECT_NEAR(*model.predict(1e8), 10.0, 1e-9);
  EXPECT_TRUE(*model.predict(1e9) >= 0.03);
}

TEST(CostModel, EveryCallGetsAPredictionAtLeastTheFloor) {
  CostModel model(0.02);
  EXPECT_DOUBLE_EQ(model.predict_or_floor(1e6), 0.02);  // nothing answered yet: the floor
  EXPECT_DOUBLE_EQ(model.predict_or_floor(0), 0.02);    // not a computation: the floor
  model.record(1e3, 0.001);                             // too fast to time: under the floor
  EXPECT_DOUBLE_EQ(model.predict_or_floor(1e2), 0.02);  // below every answered call
  EXPECT_DOUBLE_EQ(model.predict_or_floor(1e5), 0.02);  // unmeasured: the floor, not scaled (hours at 1e5x)
  model.record(1e6, 0.1);
  EXPECT_DOUBLE_EQ(model.predict_or_floor(2e6), *model.predict(2e6));  // measured wins
  EXPECT_NEAR(model.predict_or_floor(2e6), 0.2, 1e-12);
}

TEST(CostModel, WorkCountsEveryPairDense) {
  Problem p;
  p.shape = {2, 4, 1, 3, 5, 8, 16};
  EXPECT_EQ(forward_work(p), 2.0 * 4 * 3 * 5 * (8 + 16));
  DecodeConfig c;
  c.batch = 2, c.heads = 4, c.kv_heads = 1, c.head_dim = 8, c.value_dim = 16;
  EXPECT_EQ(decode_step_work(c, 10, 2), 2.0 * 4 * 2 * 12 * 24);
}

}  // namespace
}  // namespace attest
