// zinc/gguf/file.cpp — File: opening (mmap) or wrapping a buffer, and the typed metadata and
// tensor lookups. Parsing and validation live in parser.cpp.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gguf/gguf.h"
#include "gguf/parser.h"
#include "util/check.h"

namespace zinc::gguf {

namespace {

std::string errno_text(int e) { return std::strerror(e); }

}  // namespace

Result<std::unique_ptr<File>> File::open(const std::string& path) {
    // Refuse FIFOs, sockets and devices before open(): opening a FIFO blocks until a writer
    // appears (a hang, not an error). The fstat below checks the opened file again.
    {
        struct stat pre {};
        if (::stat(path.c_str(), &pre) == 0 && !S_ISREG(pre.st_mode) && !S_ISDIR(pre.st_mode))
            return make_error(path + ": is not a regular file; expected a GGUF file");
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        const int e = errno;
        return make_error(path + ": cannot open: " + errno_text(e));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        return make_error(path + ": cannot stat: " + errno_text(e));
    }
    if (S_ISDIR(st.st_mode)) {
        ::close(fd);
        return make_error(path + ": is a directory; expected a GGUF file");
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return make_error(path + ": is not a regular file; expected a GGUF file");
    }
    std::unique_ptr<File> f(new File());
    f->path_ = path;
    f->size_ = static_cast<size_t>(st.st_size);
    if (f->size_ > 0) {
        void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int e = errno;
            ::close(fd);
            return make_error(path + ": cannot mmap " + std::to_string(f->size_) +
                              " bytes: " + errno_text(e));
        }
        f->base_ = static_cast<const uint8_t*>(p);
        f->mapped_ = true;
    }
    ::close(fd);  // the mapping keeps the file referenced
    Parser parser(*f);
    ZINC_TRY(parser.parse());
    return f;
}

Result<std::unique_ptr<File>> File::from_buffer(const uint8_t* data, size_t size,
                                                const std::string& name) {
    std::unique_ptr<File> f(new File());
    f->path_ = name;
    f->base_ = size > 0 ? data : nullptr;
    f->size_ = data ? size : 0;
    f->mapped_ = false;
    Parser parser(*f);
    ZINC_TRY(parser.parse());
    return f;
}

File::~File() {
    if (mapped_ && base_) ::munmap(const_cast<uint8_t*>(base_), size_);
}

const std::vector<std::pair<std::string_view, Value>>& File::metadata() const {
    ZINC_CHECK(!released_);
    return kv_;
}

void File::release_metadata() {
    // swap with empties so the memory is really returned (clear() keeps capacity)
    std::vector<std::pair<std::string_view, Value>>().swap(kv_);
    std::unordered_map<std::string_view, size_t>().swap(kv_index_);
    std::vector<size_t>().swap(kv_offsets_);
    released_ = true;
}

const Value* File::find(std::string_view key) const {
    ZINC_CHECK(!released_);
    auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

namespace {

/// "<file>: byte N: metadata key 'k' has type u32; expected string"
Error wrong_type(const std::string& path, size_t offset, std::string_view key, ValueType got,
                 std::string_view expected) {
    return make_error(path + ": byte " + std::to_string(offset) + ": metadata key " +
                      quote_for_message(key) + " has type " + std::string(value_type_name(got)) +
                      "; expected " + std::string(expected));
}

}  // namespace

Result<std::optional<std::string_view>> File::get_string(std::string_view key) const {
    ZINC_CHECK(!released_);
    auto it = kv_index_.find(key);
    if (it == kv_index_.end()) return std::optional<std::string_view>();
    const Value& v = kv_[it->second].second;
    if (v.type != ValueType::STRING) {
        return wrong_type(path_, kv_offsets_[it->second], key, v.type, "string");
    }
    return std::optional<std::string_view>(v.str);
}

Result<std::optional<int64_t>> File::get_int(std::string_view key) const {
    ZINC_CHECK(!released_);
    auto it = kv_index_.find(key);
    if (it == kv_index_.end()) return std::optional<int64_t>();
    const Value& v = kv_[it->second].second;
    if (!v.is_integer()) return wrong_type(path_, kv_offsets_[it->second], key, v.type, "an integer");
    auto x = v.as_int();
    if (!x) {
        return make_error(path_ + ": byte " + std::to_string(kv_offsets_[it->second]) +
                          ": metadata key " + quote_for_message(key) + " value " +
                          std::to_string(v.u) + " does not fit in i64");
    }
    return std::optional<int64_t>(*x);
}

Result<std::optional<double>> File::get_float(std::string_view key) const {
    ZINC_CHECK(!released_);
    auto it = kv_index_.find(key);
    if (it == kv_index_.end()) return std::optional<double>();
    const Value& v = kv_[it->second].second;
    auto x = v.as_float();
    if (!x) return wrong_type(path_, kv_offsets_[it->second], key, v.type, "a number");
    return std::optional<double>(*x);
}

Result<std::optional<bool>> File::get_bool(std::string_view key) const {
    ZINC_CHECK(!released_);
    auto it = kv_index_.find(key);
    if (it == kv_index_.end()) return std::optional<bool>();
    const Value& v = kv_[it->second].second;
    if (v.type != ValueType::BOOL) return wrong_type(path_, kv_offsets_[it->second], key, v.type, "bool");
    return std::optional<bool>(v.u != 0);
}

Result<const Value*> File::get_array(std::string_view key) const {
    ZINC_CHECK(!released_);
    auto it = kv_index_.find(key);
    if (it == kv_index_.end()) return static_cast<const Value*>(nullptr);
    const Value& v = kv_[it->second].second;
    if (v.type != ValueType::ARRAY) return wrong_type(path_, kv_offsets_[it->second], key, v.type, "array");
    return &v;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace zinc::gguf
