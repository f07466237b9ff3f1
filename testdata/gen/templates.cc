// A template-heavy translation unit: the compiler's memory while it
// instantiates this is the anon-cc1plus corpus (testdata/make_corpora.sh).
// Each of KINDS tag types gets its own containers, variant visitors, range
// pipelines, regex engine and stream formatting, so the compiler's heap grows
// with KINDS. Compile: g++ -std=c++20 -O2 -DKINDS=8 -c templates.cc
#include <algorithm>
#include <functional>
#include <iostream>
#include <map>
#include <numeric>
#include <optional>
#include <ranges>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#ifndef KINDS
#define KINDS 8
#endif

template <int N>
struct Key {
  long id;
  std::string name;
  auto operator<=>(const Key&) const = default;
};

template <int N>
struct KeyHash {
  std::size_t operator()(const Key<N>& k) const {
    return std::hash<long>()(k.id) ^ (std::hash<std::string>()(k.name) << N);
  }
};

template <int N>
struct Traits : std::regex_traits<char> {};

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

template <int N>
using Value = std::variant<int, double, std::string, Key<N>, std::vector<int>>;

template <int N>
std::string Describe(const Value<N>& v) {
  return std::visit(
      Overloaded{[](int i) { return "int " + std::to_string(i + N); },
                 [](double d) { return "double " + std::to_string(d * N); },
                 [](const std::string& s) { return "string " + s; },
                 [](const Key<N>& k) { return "key " + k.name; },
                 [](const std::vector<int>& xs) {
                   return "vector " + std::to_string(xs.size());
                 }},
      v);
}

template <int N>
std::string Work(const std::vector<std::string>& words) {
  std::map<Key<N>, std::string> ordered;
  std::multimap<std::string, Key<N>> by_name;
  std::unordered_map<Key<N>, std::vector<Value<N>>, KeyHash<N>> values;
  std::set<std::tuple<int, std::string, double>> seen;
  long id = N;
  for (const std::string& w : words) {
    Key<N> k{id++, w};
    ordered.emplace(k, w + std::to_string(N));
    by_name.emplace(w, k);
    values[k].push_back(Value<N>{static_cast<int>(id)});
    values[k].push_back(Value<N>{w});
    values[k].push_back(Value<N>{k});
    seen.emplace(static_cast<int>(id % 7), w, id * 0.5);
  }
  auto long_words = words |
                    std::views::filter([](const std::string& s) {
                      return s.size() > N % 5;
                    }) |
                    std::views::transform([](const std::string& s) {
                      return s + std::to_string(N);
                    }) |
                    std::views::take(100);
  std::vector<std::string> kept;
  for (const std::string& s : long_words) kept.push_back(s);
  std::ranges::sort(kept, std::ranges::greater{});
  std::basic_regex<char, Traits<N>> re("([a-z]+)_(\\d+)(?:\\.(\\w+))?");
  std::match_results<std::string::const_iterator> m;
  std::ostringstream out;
  for (const std::string& s : kept) {
    if (std::regex_search(s, m, re)) out << m[1] << ':' << m[2] << ';';
  }
  for (const auto& [k, vs] : values) {
    for (const Value<N>& v : vs) out << Describe<N>(v) << '\n';
  }
  out << std::accumulate(seen.begin(), seen.end(), 0.0,
                         [](double a, const auto& t) {
                           return a + std::get<2>(t);
                         });
  for (const auto& [name, k] : by_name) out << name << k.id;
  return out.str() + std::to_string(ordered.size());
}

template <std::size_t... I>
std::string All(const std::vector<std::string>& words,
                std::index_sequence<I...>) {
  return (Work<static_cast<int>(I)>(words) + ...);
}

int main(int argc, char** argv) {
  std::vector<std::string> words(argv, argv + argc);
  std::cout << All(words, std::make_index_sequence<KINDS>{}).size() << '\n';
}
