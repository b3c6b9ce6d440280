// Minimal protobuf wire-format reader for the ONNX messages the converter needs.
#include <cstring>

#include "common/OnnxModel.hpp"

namespace fixconv {
namespace {

struct Field {
    uint32_t number = 0;
    uint32_t wire = 0;
    uint64_t varint = 0;         // wire 0, 1 (raw bits), 5 (raw bits)
    const uint8_t* data = nullptr;  // wire 2
    size_t size = 0;
};

class Cursor {
public:
    Cursor(const uint8_t* p, size_t n) : mPos(p), mEnd(p + n) {}
    bool done() const { return mPos >= mEnd; }
    bool bad() const { return mBad; }

    bool varint(uint64_t* v) {
        *v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (mPos >= mEnd) return fail();
            uint8_t b = *mPos++;
            *v |= static_cast<uint64_t>(b & 0x7f) << shift;
            if ((b & 0x80) == 0) return true;
        }
        return fail();
    }

    bool next(Field* f) {
        uint64_t key;
        if (!varint(&key)) return false;
        f->number = static_cast<uint32_t>(key >> 3);
        f->wire = static_cast<uint32_t>(key & 7);
        switch (f->wire) {
            case 0: return varint(&f->varint);
            case 1: return fixed(8, &f->varint);
            case 5: return fixed(4, &f->varint);
            case 2: {
                uint64_t len;
                if (!varint(&len) || len > static_cast<uint64_t>(mEnd - mPos)) return fail();
                f->data = mPos;
                f->size = static_cast<size_t>(len);
                mPos += len;
                return true;
            }
            default: return fail();
        }
    }

private:
    bool fixed(int n, uint64_t* v) {
        if (mEnd - mPos < n) return fail();
        *v = 0;
        for (int i = 0; i < n; ++i) *v |= static_cast<uint64_t>(mPos[i]) << (8 * i);
        mPos += n;
        return true;
    }
    bool fail() {
        mBad = true;
        return false;
    }
    const uint8_t* mPos;
    const uint8_t* mEnd;
    bool mBad = false;
};

std::string str(const Field& f) { return std::string(reinterpret_cast<const char*>(f.data), f.size); }

float asFloat(uint64_t bits) {
    uint32_t b = static_cast<uint32_t>(bits);
    float v;
    std::memcpy(&v, &b, 4);
    return v;
}

double asDouble(uint64_t bits) {
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
}

// Repeated integer field: packed (wire 2) or one value per field (wire 0).
bool appendInts(const Field& f, std::vector<int64_t>* out) {
    if (f.wire == 0) {
        out->push_back(static_cast<int64_t>(f.varint));
        return true;
    }
    if (f.wire != 2) return false;
    Cursor c(f.data, f.size);
    while (!c.done()) {
        uint64_t v;
        if (!c.varint(&v)) return false;
        out->push_back(static_cast<int64_t>(v));
    }
    return true;
}

// Repeated float (fixed32) or double (fixed64) field, packed or not.
bool appendReals(const Field& f, int width, std::vector<float>* out) {
    if (f.wire == 5 || f.wire == 1) {
        out->push_back(width == 4 ? asFloat(f.varint) : static_cast<float>(asDouble(f.varint)));
        return true;
    }
    if (f.wire != 2 || f.size % width != 0) return false;
    for (size_t i = 0; i < f.size; i += width) {
        uint64_t bits = 0;
        for (int k = 0; k < width; ++k) bits |= static_cast<uint64_t>(f.data[i + k]) << (8 * k);
        out->push_back(width == 4 ? asFloat(bits) : static_cast<float>(asDouble(bits)));
    }
    return true;
}

bool parseTensor(const uint8_t* p, size_t n, OnnxTensor* t) {
    Cursor c(p, n);
    Field f;
    std::string raw;
    bool hasRaw = false;
    while (!c.done()) {
        if (!c.next(&f)) return false;
        switch (f.number) {
            case 1: if (!appendInts(f, &t->dims)) return false; break;
            case 2: t->dataType = static_cast<int>(f.varint); break;
            case 4: if (!appendReals(f, 4, &t->floats)) return false; break;
            case 5: case 7: if (!appendInts(f, &t->ints)) return false; break;
            case 8: t->name = str(f); break;
            case 9: raw = str(f); hasRaw = true; break;
            case 10: if (!appendReals(f, 8, &t->floats)) return false; break;
            default: break;
        }
    }
    if (hasRaw) {
        const uint8_t* d = reinterpret_cast<const uint8_t*>(raw.data());
        size_t width = (t->dataType == ONNX_INT64 || t->dataType == ONNX_DOUBLE) ? 8
                       : (t->dataType == ONNX_BOOL) ? 1 : 4;
        if (raw.size() % width != 0) return false;
        for (size_t i = 0; i < raw.size(); i += width) {
            uint64_t bits = 0;
            for (size_t k = 0; k < width; ++k) bits |= static_cast<uint64_t>(d[i + k]) << (8 * k);
            switch (t->dataType) {
                case ONNX_FLOAT: t->floats.push_back(asFloat(bits)); break;
                case ONNX_DOUBLE: t->floats.push_back(static_cast<float>(asDouble(bits))); break;
                case ONNX_INT32: t->ints.push_back(static_cast<int32_t>(static_cast<uint32_t>(bits))); break;
                default: t->ints.push_back(static_cast<int64_t>(bits)); break;
            }
        }
    }
    return true;
}

bool parseAttribute(const uint8_t* p, size_t n, std::string* name, OnnxAttribute* a) {
    Cursor c(p, n);
    Field f;
    while (!c.done()) {
        if (!c.next(&f)) return false;
        switch (f.number) {
            case 1: *name = str(f); break;
            case 2: a->f = asFloat(f.varint); a->hasFloat = true; break;
            case 3: a->i = static_cast<int64_t>(f.varint); a->hasInt = true; break;
            case 4: a->s = str(f); break;
            case 7: if (!appendReals(f, 4, &a->floats)) return false; break;
            case 8: if (!appendInts(f, &a->ints)) return false; break;
            default: break;
        }
    }
    return true;
}

bool parseNode(const uint8_t* p, size_t n, OnnxNode* node) {
    Cursor c(p, n);
    Field f;
    while (!c.done()) {
        if (!c.next(&f)) return false;
        switch (f.number) {
            case 1: node->inputs.push_back(str(f)); break;
            case 2: node->outputs.push_back(str(f)); break;
            case 3: node->name = str(f); break;
            case 4: node->opType = str(f); break;
            case 7: node->domain = str(f); break;
            case 5: {
                std::string name;
                OnnxAttribute a;
                if (!parseAttribute(f.data, f.size, &name, &a)) return false;
                node->attrs[name] = a;
                break;
            }
            default: break;
        }
    }
    return true;
}

// ValueInfoProto → name, TypeProto.tensor_type.{elem_type, shape.dim[].dim_value}
bool parseValueInfo(const uint8_t* p, size_t n, OnnxValueInfo* v) {
    Cursor c(p, n);
    Field f;
    while (!c.done()) {
        if (!c.next(&f)) return false;
        if (f.number == 1) {
            v->name = str(f);
        } else if (f.number == 2) {
            Cursor type(f.data, f.size);
            Field tf;
            while (!type.done()) {
                if (!type.next(&tf)) return false;
                if (tf.number != 1) continue;  // tensor_type
                Cursor tensor(tf.data, tf.size);
                Field ef;
                while (!tensor.done()) {
                    if (!tensor.next(&ef)) return false;
                    if (ef.number == 1) {
                        v->elemType = static_cast<int>(ef.varint);
                    } else if (ef.number == 2) {
                        Cursor shape(ef.data, ef.size);
                        Field sf;
                        while (!shape.done()) {
                            if (!shape.next(&sf)) return false;
                            if (sf.number != 1) continue;
                            Cursor dim(sf.data, sf.size);
                            Field df;
                            int64_t value = -1;
                            while (!dim.done()) {
                                if (!dim.next(&df)) return false;
                                if (df.number == 1) value = static_cast<int64_t>(df.varint);
                            }
                            v->dims.push_back(value);
                        }
                    }
                }
            }
        }
    }
    return true;
}

bool parseGraph(const uint8_t* p, size_t n, OnnxModel* m) {
    Cursor c(p, n);
    Field f;
    std::vector<OnnxValueInfo> declared;
    while (!c.done()) {
        if (!c.next(&f)) return false;
        if (f.number == 1) {
            OnnxNode node;
            if (!parseNode(f.data, f.size, &node)) return false;
            m->nodes.push_back(node);
        } else if (f.number == 5) {
            OnnxTensor t;
            if (!parseTensor(f.data, f.size, &t)) return false;
            m->initializers[t.name] = t;
        } else if (f.number == 11 || f.number == 12) {
            OnnxValueInfo v;
            if (!parseValueInfo(f.data, f.size, &v)) return false;
            (f.number == 11 ? declared : m->outputs).push_back(v);
        }
    }
    for (auto& v : declared) {
        if (m->initializers.count(v.name) == 0) m->inputs.push_back(v);
    }
    return true;
}

}  // namespace

bool readOnnxModel(const std::string& bytes, OnnxModel* model, std::string* err) {
    Cursor c(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    Field f;
    bool hasGraph = false;
    while (!c.done()) {
        if (!c.next(&f)) {
            *err = "truncated or malformed ModelProto";
            return false;
        }
        if (f.number == 7 && f.wire == 2) {
            if (!parseGraph(f.data, f.size, model)) {
                *err = "malformed GraphProto";
                return false;
            }
            hasGraph = true;
        } else if (f.number == 8 && f.wire == 2) {  // OperatorSetIdProto {domain=1, version=2}
            Cursor o(f.data, f.size);
            Field of;
            std::string domain;
            int64_t version = 0;
            while (!o.done() && o.next(&of)) {
                if (of.number == 1) domain = str(of);
                if (of.number == 2) version = static_cast<int64_t>(of.varint);
            }
            if (domain.empty() || domain == "ai.onnx") model->opset = version;
        }
    }
    if (!hasGraph) {
        *err = "ModelProto has no graph";
        return false;
    }
    return true;
}

}  // namespace fixconv
