// nn::Module: registration and PyTorch's dotted names, recursive listing,
// train/eval, to(dtype), state dicts and each loadStateDict error,
// zeroGrad, ModuleHolder and Sequential.
#include <gtest/gtest.h>

#include "common/error_of.h"
#include "frontend/kiln.h"

namespace kiln {
namespace {

using nn::Module;

// A layer of its own: a parameter, a persistent and a non-persistent buffer.
struct ScaleImpl : Module {
  Tensor scale, count, cache;
  explicit ScaleImpl(int64_t n) : Module("Scale") {
    scale = registerParameter("scale", full({n}, 2.0));
    count = registerBuffer("count", zeros({1}, DType::i64));
    cache = registerBuffer("cache", zeros({n}), /*persistent=*/false);
  }
  Tensor forward(const Tensor& x) override { return x * scale; }
};
KILN_MODULE(Scale);

// Two levels: block.{inner, scale}, and a parameter of its own.
struct BlockImpl : Module {
  Scale inner{nullptr};
  Tensor bias;
  BlockImpl() : Module("Block") {
    bias = registerParameter("bias", zeros({3}));
    inner = registerModule("inner", Scale(3));
  }
  Tensor forward(const Tensor& x) override { return inner(x) + bias; }
};
KILN_MODULE(Block);

struct NetImpl : Module {
  Block encoder{nullptr};
  std::shared_ptr<ScaleImpl> head;
  NetImpl() : Module("Net") {
    encoder = registerModule("encoder", Block());
    head = registerModule("head", std::make_shared<ScaleImpl>(3));
  }
  Tensor forward(const Tensor& x) override { return head->forward(encoder(x)); }
};
KILN_MODULE(Net);

std::vector<std::string> keysOf(const nn::OrderedDict<Tensor>& d) { return d.keys(); }

TEST(NnModule, NamesAreDottedPathsInRegistrationOrder) {
  Net net;
  EXPECT_EQ(keysOf(net->namedParameters()),
            (std::vector<std::string>{"encoder.bias", "encoder.inner.scale", "head.scale"}));
  EXPECT_EQ(keysOf(net->namedBuffers()),
            (std::vector<std::string>{"encoder.inner.count", "encoder.inner.cache", "head.count", "head.cache"}));
  EXPECT_EQ(keysOf(net->encoder->namedParameters(/*recurse=*/false)), (std::vector<std::string>{"bias"}));
  EXPECT_TRUE(net->namedParameters(false).empty());
  EXPECT_EQ(net->namedChildren().keys(), (std::vector<std::string>{"encoder", "head"}));
  ASSERT_EQ(net->children().size(), 2u);
  EXPECT_EQ(net->children()[1].get(), net->head.get());
  // parameters() are the very tensors the members hold (shared TensorImpl).
  std::vector<Tensor> params = net->parameters();
  ASSERT_EQ(params.size(), 3u);
  EXPECT_EQ(params[0].impl(), net->encoder->bias.impl());
  EXPECT_EQ(params[2].impl(), net->head->scale.impl());
  for (const Tensor& p : params) EXPECT_TRUE(p.requiresGrad());
  EXPECT_FALSE(net->head->count.requiresGrad());
}

TEST(NnModule, SharedModulesAndTensorsAreListedOnceButSavedUnderEveryName) {
  Module root("Root");
  auto shared = std::make_shared<ScaleImpl>(2);
  root.registerModule("a", shared);
  root.registerModule("b", shared);
  Tensor w = zeros({2});
  root.registerParameter("w", w);
  EXPECT_EQ(keysOf(root.namedParameters()), (std::vector<std::string>{"w", "a.scale"}));
  EXPECT_EQ(root.stateDict().keys(), (std::vector<std::string>{"w", "a.scale", "a.count", "b.scale", "b.count"}));
}

TEST(NnModule, RegistrationErrors) {
  Module m("Thing");
  m.registerParameter("w", zeros({2}));
  EXPECT_EQ(errorOf([&] { m.registerParameter("w", zeros({2})); }),
            "registerParameter: Thing already has a parameter named \"w\"");
  EXPECT_EQ(errorOf([&] { m.registerBuffer("w", zeros({2})); }),
            "registerBuffer: Thing already has a parameter named \"w\"");
  EXPECT_EQ(errorOf([&] { m.registerParameter("", zeros({2})); }), "registerParameter: the name is empty");
  EXPECT_EQ(errorOf([&] { m.registerParameter("a.b", zeros({2})); }),
            "registerParameter: the name \"a.b\" contains a '.' (the dot joins a submodule's name to its tensors' "
            "names)");
  EXPECT_EQ(errorOf([&] { m.registerParameter("i", zeros({2}, DType::i64)); }),
            "registerParameter: \"i\" is i64[2]@cpu; parameters are floating-point (register an integer tensor with "
            "registerBuffer)");
  EXPECT_EQ(errorOf([&] { m.registerParameter("u", Tensor()); }), "registerParameter: \"u\" is an undefined tensor");
  Tensor leaf = zeros({2}).setRequiresGrad();
  EXPECT_EQ(errorOf([&] { m.registerParameter("y", leaf * 2.0); }),
            "registerParameter: \"y\" (f32[2]@cpu) is not a leaf (it was computed by MulBackward); register "
            "detach() of it");
  EXPECT_EQ(errorOf([&] { m.registerModule("s", std::shared_ptr<ScaleImpl>()); }),
            "registerModule: \"s\" is a null module");
  EXPECT_EQ(errorOf([&] { m.registerModule("w", Scale(1)); }),
            "registerModule: Thing already has a parameter named \"w\"");
  EXPECT_EQ(errorOf([&] { m.forward(zeros({1})); }),
            "forward: Thing has no forward(Tensor) (got f32[1]@cpu); override forward, or call the forward it defines");
  Scale empty{nullptr};
  EXPECT_TRUE(empty.isEmpty());
  EXPECT_EQ(errorOf([&] { empty->forward(zeros({1})); }),
            "nn: use of an empty module holder (one made from nullptr and never assigned)");
  // A failed registration leaves the module as it was.
  EXPECT_EQ(keysOf(m.namedParameters()), (std::vector<std::string>{"w"}));
}

TEST(NnModule, TrainAndEvalReachEverySubmodule) {
  Net net;
  EXPECT_TRUE(net->isTraining());
  net->eval();
  EXPECT_FALSE(net->isTraining());
  EXPECT_FALSE(net->encoder->isTraining());
  EXPECT_FALSE(net->encoder->inner->isTraining());
  EXPECT_FALSE(net->head->isTraining());
  net->encoder->train();
  EXPECT_FALSE(net->isTraining());
  EXPECT_TRUE(net->encoder->inner->isTraining());
  EXPECT_FALSE(net->head->isTraining());
  int visited = 0;
  net->apply([&](Module& m) {
    ++visited;
    m.train(true);
  });
  EXPECT_EQ(visited, 4);
  EXPECT_TRUE(net->head->isTraining());
}

TEST(NnModule, HoldersShareTheirModuleAndCallForward) {
  Scale a(3);
  Scale b = a;  // a copy shares the module, as libtorch's holders
  EXPECT_EQ(a.ptr(), b.ptr());
  {
    NoGradGuard noGrad;
    b->scale.copy_(fromVector({1, 2, 3}));
  }
  EXPECT_EQ(a->scale.toVector(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(a(fromVector({2, 2, 2})).toVector(), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ((*a)(fromVector({1, 1, 1})).toVector(), (std::vector<float>{1, 2, 3}));
  Scale c(std::make_shared<ScaleImpl>(1));  // holds an existing module
  EXPECT_EQ(c->scale.numel(), 1);
}

TEST(NnModule, StateDictRoundTripIntoAFreshModule) {
  Net source;
  {
    NoGradGuard noGrad;
    source->encoder->bias.copy_(fromVector({1, 2, 3}));
    source->head->scale.copy_(fromVector({-1, 0.5, 4}));
    source->head->count.fill_(7);
  }
  nn::StateDict dict = source->stateDict();
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"encoder.bias", "encoder.inner.scale", "encoder.inner.count",
                                                   "head.scale", "head.count"}));  // no non-persistent cache
  EXPECT_FALSE(dict["head.scale"].requiresGrad());
  Net target;
  const Tensor targetBias = target->encoder->bias;
  nn::LoadStateDictResult r = target->loadStateDict(dict);
  EXPECT_TRUE(r.missingKeys.empty());
  EXPECT_TRUE(r.unexpectedKeys.empty());
  EXPECT_EQ(target->encoder->bias.toVector(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(target->head->scale.toVector(), (std::vector<float>{-1, 0.5, 4}));
  EXPECT_EQ(target->head->count.toVector<int64_t>(), (std::vector<int64_t>{7}));
  // Copied into the same tensors: handles stay valid, gradients still flow.
  EXPECT_EQ(targetBias.impl(), target->encoder->bias.impl());
  EXPECT_TRUE(target->head->scale.requiresGrad());
  sum(target->forward(ones({3}))).backward();
  EXPECT_EQ(target->head->scale.grad().toVector(), (std::vector<float>{3, 4, 5}));  // 1 * 2 + bias
  // The values were copied, not shared: changing the source leaves the target.
  {
    NoGradGuard noGrad;
    source->encoder->bias.fill_(0);
  }
  EXPECT_EQ(target->encoder->bias.toVector(), (std::vector<float>{1, 2, 3}));
}

TEST(NnModule, StateDictValuesShareStorageWithTheModule) {
  Scale s(2);
  nn::StateDict dict = s->stateDict();
  {
    NoGradGuard noGrad;
    s->scale.fill_(5);
  }
  EXPECT_EQ(dict["scale"].toVector(), (std::vector<float>{5, 5}));
}

TEST(NnModule, LoadStateDictNamesEachProblem) {
  Block block;
  auto dictOf = [](std::initializer_list<std::pair<std::string, Tensor>> items) {
    nn::StateDict d;
    for (const auto& [k, v] : items) d.insert(k, v);
    return d;
  };
  const Tensor count = zeros({1}, DType::i64);
  EXPECT_EQ(errorOf([&] {
              block->loadStateDict(dictOf({{"bias", zeros({3})}, {"inner.count", count}}));
            }),
            "loadStateDict: missing key \"inner.scale\" (the module's f32[3]@cpu)");
  EXPECT_EQ(errorOf([&] {
              block->loadStateDict(dictOf(
                  {{"bias", zeros({3})}, {"inner.scale", zeros({3})}, {"inner.count", count}, {"extra", zeros({2})}}));
            }),
            "loadStateDict: unexpected key \"extra\" (f32[2]@cpu): Block has no parameter or persistent buffer of "
            "that name");
  EXPECT_EQ(errorOf([&] {
              block->loadStateDict(dictOf({{"bias", zeros({4})}, {"inner.scale", zeros({3})}, {"inner.count", count}}));
            }),
            "loadStateDict: \"bias\" is f32[4]@cpu in the state dict but f32[3]@cpu in the module");
  EXPECT_EQ(errorOf([&] {
              block->loadStateDict(
                  dictOf({{"bias", zeros({3}, DType::f64)}, {"inner.scale", zeros({3})}, {"inner.count", count}}));
            }),
            "loadStateDict: \"bias\" is f64[3]@cpu in the state dict but f32[3]@cpu in the module");
  EXPECT_EQ(errorOf([&] {
              block->loadStateDict(dictOf({{"bias", Tensor()}, {"inner.scale", zeros({3})}, {"inner.count", count}}));
            }),
            "loadStateDict: \"bias\" is an undefined tensor in the state dict");
  // Every problem in one message; nothing is loaded when one is found.
  EXPECT_EQ(errorOf([&] {
              block->loadStateDict(dictOf({{"bias", fromVector({9, 9, 9})}, {"x", zeros({1})}}));
            }),
            "loadStateDict: missing key \"inner.scale\" (the module's f32[3]@cpu); missing key \"inner.count\" (the "
            "module's i64[1]@cpu); unexpected key \"x\" (f32[1]@cpu): Block has no parameter or persistent buffer "
            "of that name");
  EXPECT_EQ(block->bias.toVector(), (std::vector<float>{0, 0, 0}));
}

TEST(NnModule, LoadStateDictNotStrictReturnsTheKeysItSkipped) {
  Block block;
  nn::StateDict d;
  d.insert("bias", fromVector({1, 2, 3}));
  d.insert("other", zeros({1}));
  nn::LoadStateDictResult r = block->loadStateDict(d, /*strict=*/false);
  EXPECT_EQ(r.missingKeys, (std::vector<std::string>{"inner.scale", "inner.count"}));
  EXPECT_EQ(r.unexpectedKeys, (std::vector<std::string>{"other"}));
  EXPECT_EQ(block->bias.toVector(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(block->inner->scale.toVector(), (std::vector<float>{2, 2, 2}));
  // A shape mismatch is an error even when not strict.
  d.insertOrAssign("bias", zeros({2}));
  EXPECT_EQ(errorOf([&] { block->loadStateDict(d, false); }),
            "loadStateDict: \"bias\" is f32[2]@cpu in the state dict but f32[3]@cpu in the module");
}

TEST(NnModule, ToDtypeConvertsFloatTensorsInPlace) {
  Net net;
  const Tensor scale = net->head->scale;
  sum(net->forward(ones({3}))).backward();
  ASSERT_EQ(scale.grad().str(), "f32[3]@cpu");
  net->to(DType::f64);
  // The same handles now hold f64 data; integer buffers stay i64.
  EXPECT_EQ(scale.str(), "f64[3]@cpu");
  EXPECT_EQ(net->head->scale.impl(), scale.impl());
  EXPECT_EQ(scale.toVector<double>(), (std::vector<double>{2, 2, 2}));
  EXPECT_EQ(scale.grad().str(), "f64[3]@cpu");
  EXPECT_TRUE(scale.requiresGrad());
  EXPECT_EQ(net->head->count.str(), "i64[1]@cpu");
  EXPECT_EQ(net->head->cache.str(), "f64[3]@cpu");
  for (const auto& [name, t] : net->stateDict())
    EXPECT_TRUE(t.dtype() == DType::f64 || t.dtype() == DType::i64) << name;
  // It still trains: gradients come out in f64.
  net->zeroGrad();
  sum(net->forward(ones({3}, DType::f64))).backward();
  EXPECT_EQ(scale.grad().str(), "f64[3]@cpu");
  net->to(DType::f16);
  EXPECT_EQ(scale.str(), "f16[3]@cpu");
  EXPECT_EQ(errorOf([&] { net->to(DType::i32); }),
            "to: Net can only be converted to a floating-point dtype (f32, f64, f16, bf16), got i32");
}

TEST(NnModule, ToDeviceAcceptsTheCpuOnly) {
  Scale s(2);
  s->to(Device::cpu());
  s->to(Device::cpu(), DType::f64);
  EXPECT_EQ(s->scale.str(), "f64[2]@cpu");
  if (std::string why; !isAvailable(DeviceType::cuda, &why)) {
    EXPECT_EQ(errorOf([&] { s->to(Device::cuda(0)); }), "to: cannot move Scale to cuda:0: " + why);
  }
}

TEST(NnModule, ZeroGradClearsOrZeroes) {
  Block block;
  sum(block->forward(ones({3}))).backward();
  ASSERT_TRUE(block->bias.grad().defined());
  block->zeroGrad(/*setToNone=*/false);
  EXPECT_EQ(block->bias.grad().toVector(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(block->inner->scale.grad().toVector(), (std::vector<float>{0, 0, 0}));
  block->zeroGrad();
  EXPECT_FALSE(block->bias.grad().defined());
  EXPECT_FALSE(block->inner->scale.grad().defined());
}

TEST(NnSequential, NamesIndexingAndForward) {
  nn::Sequential seq(Scale(2), std::make_shared<ScaleImpl>(2));
  seq->push_back(Scale(2));
  ASSERT_EQ(seq->size(), 3u);
  EXPECT_EQ(keysOf(seq->namedParameters()), (std::vector<std::string>{"0.scale", "1.scale", "2.scale"}));
  EXPECT_EQ(seq->namedChildren().keys(), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(&seq->at<ScaleImpl>(1), seq[1].get());
  EXPECT_EQ(seq(fromVector({1, 3})).toVector(), (std::vector<float>{8, 24}));  // x * 2 * 2 * 2
  EXPECT_EQ(errorOf([&] { (void)seq[3]; }), "Sequential: index 3 is out of range for 3 modules");
  EXPECT_EQ(errorOf([&] { seq->at<BlockImpl>(0); }), "Sequential: module 0 is a Scale, not the type asked for");
  nn::Sequential empty;
  EXPECT_EQ(empty(fromVector({1})).toVector(), (std::vector<float>{1}));
  EXPECT_EQ(errorOf([&] { empty->push_back(Scale(nullptr)); }),
            "Sequential: push_back of a null module (an empty holder?)");
}

TEST(NnOrderedDict, KeepsInsertionOrderAndRefusesDuplicates) {
  nn::OrderedDict<int> d{{"b", 1}, {"a", 2}};
  d.insert("c", 3);
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(d["a"], 2);
  EXPECT_EQ(d.find("z"), nullptr);
  EXPECT_EQ(errorOf([&] { d.insert("a", 5); }), "OrderedDict: key \"a\" is already present");
  EXPECT_EQ(errorOf([&] { d.at("z"); }), "OrderedDict: no key \"z\"");
  d.insertOrAssign("a", 7);
  EXPECT_EQ(d.values(), (std::vector<int>{1, 7, 3}));
}

}  // namespace
}  // namespace kiln
