// Fixture converter: composite rewrites for ONNX ops without a direct converter.  An ONNX node whose
// op type has no entry in onnx/ is looked up here; each file in this folder rewrites one op type into
// several engine ops and registers itself with a static initializer:
//     static bool rewriteFoo(const OnnxNode&, ConvGraph&, std::string* err) { ... }
//     REGISTER_ONNX_EXTRA(Foo, rewriteFoo);
#pragma once
#include "common/Graph.hpp"

namespace fixconv {

struct OnnxExtraManager {
    static void add(const std::string& onnxType, OnnxConvertFunction fn);
    static OnnxConvertFunction find(const std::string& onnxType);
};

struct OnnxExtraRegister {
    OnnxExtraRegister(const char* onnxType, OnnxConvertFunction fn) { OnnxExtraManager::add(onnxType, fn); }
};

}  // namespace fixconv

#define REGISTER_ONNX_EXTRA(onnxType, fn) \
    static fixconv::OnnxExtraRegister _onnx_extra_##onnxType(#onnxType, fn)
