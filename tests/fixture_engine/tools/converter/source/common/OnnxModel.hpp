// Fixture converter: the parts of an ONNX model it understands, read from the protobuf wire format.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fixconv {

// ONNX TensorProto.DataType values used here.
enum OnnxElemType { ONNX_FLOAT = 1, ONNX_INT32 = 6, ONNX_INT64 = 7, ONNX_BOOL = 9, ONNX_DOUBLE = 11 };

struct OnnxAttribute {
    int64_t i = 0;
    float f = 0.f;
    std::vector<int64_t> ints;
    std::vector<float> floats;
    std::string s;
    bool hasInt = false, hasFloat = false;
};

struct OnnxNode {
    std::string opType, name, domain;
    std::vector<std::string> inputs, outputs;
    std::map<std::string, OnnxAttribute> attrs;

    int64_t attrInt(const std::string& key, int64_t def) const {
        auto it = attrs.find(key);
        return (it != attrs.end() && it->second.hasInt) ? it->second.i : def;
    }
    float attrFloat(const std::string& key, float def) const {
        auto it = attrs.find(key);
        return (it != attrs.end() && it->second.hasFloat) ? it->second.f : def;
    }
    const std::vector<int64_t>* attrInts(const std::string& key) const {
        auto it = attrs.find(key);
        return (it != attrs.end() && !it->second.ints.empty()) ? &it->second.ints : nullptr;
    }
};

struct OnnxTensor {
    std::string name;
    int dataType = 0;
    std::vector<int64_t> dims;
    std::vector<float> floats;   // FLOAT / DOUBLE data
    std::vector<int64_t> ints;   // INT32 / INT64 / BOOL data
};

struct OnnxValueInfo {
    std::string name;
    int elemType = 0;
    std::vector<int64_t> dims;  // -1 for a symbolic dimension
};

struct OnnxModel {
    int64_t opset = 0;
    std::vector<OnnxNode> nodes;
    std::vector<OnnxValueInfo> inputs;  // graph inputs that are not initializers
    std::vector<OnnxValueInfo> outputs;
    std::map<std::string, OnnxTensor> initializers;
};

// Parses a serialized ModelProto.  false (with *err) on a truncated or malformed message.
bool readOnnxModel(const std::string& bytes, OnnxModel* model, std::string* err);

}  // namespace fixconv
