// Creator and geometry tables, filled by the generated register files.
#include <mutex>

#include "core/Execution.hpp"
#include "geometry/GeometryComputer.hpp"

namespace MNN {

static const CPUBackend::Creator* gCreators[OpType_MAX] = {};
static const GeometryComputer* gGeometry[OpType_MAX] = {};

bool CPUBackend::addCreator(OpType type, Creator* creator) {
    if (type < 0 || type >= OpType_MAX || gCreators[type] != nullptr) return false;
    gCreators[type] = creator;
    return true;
}

const CPUBackend::Creator* CPUBackend::findCreator(OpType type) {
    return (type >= 0 && type < OpType_MAX) ? gCreators[type] : nullptr;
}

void GeometryComputer::registerGeometryComputer(const GeometryComputer* comp, const std::vector<OpType>& types) {
    for (OpType t : types) {
        if (t >= 0 && t < OpType_MAX) gGeometry[t] = comp;
    }
}

const GeometryComputer* GeometryComputer::search(OpType type) {
    return (type >= 0 && type < OpType_MAX) ? gGeometry[type] : nullptr;
}

void ensureRegistered() {
    static std::once_flag once;
    std::call_once(once, [] {
        registerCPUOps();
        registerGeometryOps();
    });
}

}  // namespace MNN
