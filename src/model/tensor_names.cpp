// zinc/model/tensor_names.cpp — tensor name formatting.
#include "model/tensor_names.h"

namespace zinc::model::tn {

std::string global(std::string_view base, std::string_view suffix) {
    std::string s(base);
    s += '.';
    s += suffix;
    return s;
}

std::string layer(int il, std::string_view base, std::string_view suffix) {
    std::string s = "blk." + std::to_string(il) + ".";
    s += base;
    s += '.';
    s += suffix;
    return s;
}

}  // namespace zinc::model::tn
