// zinc/util/result.h — the edge error type.
//
// Functions that handle user input (files, flags, requests) return Result<T>. The error carries
// one human line: what went wrong, where (file and byte offset, tensor name, JSON path), and what
// was expected. Internal invariants use ZINC_CHECK (check.h) instead.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace zinc {

struct Error {
    std::string message;  // one line, no trailing newline
};

template <class T>
class [[nodiscard]] Result {
public:
    Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
    Result(Error error) : v_(std::move(error)) {}    // NOLINT(google-explicit-constructor)

    bool ok() const { return v_.index() == 0; }
    explicit operator bool() const { return ok(); }

    T& value() & { return std::get<0>(v_); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }

    const Error& error() const { return std::get<1>(v_); }

private:
    std::variant<T, Error> v_;
};

/// Result<void> equivalent.
template <>
class [[nodiscard]] Result<void> {
public:
    Result() = default;
    Result(Error error) : err_(std::move(error)), ok_(false) {}  // NOLINT
    bool ok() const { return ok_; }
    explicit operator bool() const { return ok_; }
    const Error& error() const { return err_; }

private:
    Error err_;
    bool ok_ = true;
};

inline Error make_error(std::string msg) { return Error{std::move(msg)}; }

}  // namespace zinc

/// Propagate an error from an expression returning Result<...>.
#define ZINC_TRY(expr)                                  \
    do {                                                \
        auto&& zinc_try_r_ = (expr);                    \
        if (!zinc_try_r_.ok()) return zinc_try_r_.error(); \
    } while (0)
