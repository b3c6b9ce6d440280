#include <map>

#include "onnx/OnnxOpConverter.hpp"
#include "optimizer/onnxextra/OnnxExtraManager.hpp"

namespace fixconv {

// Function-local statics: safe to use from other files' static initializers.
static std::map<std::string, OnnxConvertFunction>& directTable() {
    static std::map<std::string, OnnxConvertFunction> table;
    return table;
}
static std::map<std::string, OnnxConvertFunction>& extraTable() {
    static std::map<std::string, OnnxConvertFunction> table;
    return table;
}

void OnnxConverterRegistry::add(const std::string& onnxType, OnnxConvertFunction fn) { directTable()[onnxType] = fn; }
OnnxConvertFunction OnnxConverterRegistry::find(const std::string& onnxType) {
    auto it = directTable().find(onnxType);
    return it == directTable().end() ? nullptr : it->second;
}
void OnnxExtraManager::add(const std::string& onnxType, OnnxConvertFunction fn) { extraTable()[onnxType] = fn; }
OnnxConvertFunction OnnxExtraManager::find(const std::string& onnxType) {
    auto it = extraTable().find(onnxType);
    return it == extraTable().end() ? nullptr : it->second;
}

}  // namespace fixconv
