// File: testing/test_pch.cc
//
// The translation unit of ztier_test_pch (CMakeLists.txt), the target that
// builds the precompiled header every test target reuses. It has no code.
