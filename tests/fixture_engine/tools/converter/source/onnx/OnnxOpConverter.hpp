// Fixture converter: registry of direct ONNX op converters (one file per ONNX op in this folder).
//     static bool convertFoo(const OnnxNode&, ConvGraph&, std::string* err) { ... }
//     REGISTER_ONNX_CONVERTER(Foo, convertFoo);
#pragma once
#include "common/Graph.hpp"

namespace fixconv {

struct OnnxConverterRegistry {
    static void add(const std::string& onnxType, OnnxConvertFunction fn);
    static OnnxConvertFunction find(const std::string& onnxType);
};

struct OnnxConverterRegister {
    OnnxConverterRegister(const char* onnxType, OnnxConvertFunction fn) { OnnxConverterRegistry::add(onnxType, fn); }
};

}  // namespace fixconv

#define REGISTER_ONNX_CONVERTER(onnxType, fn) \
    static fixconv::OnnxConverterRegister _onnx_converter_##onnxType(#onnxType, fn)

namespace fixconv {
// An engine op with the node's name, inputs and outputs.
inline FixOp& opFromNode(ConvGraph& graph, const OnnxNode& node, const char* type) {
    FixOp& op = graph.addOp(type, node.name);
    op.inputs = node.inputs;
    op.outputs = node.outputs;
    return op;
}
}  // namespace fixconv
