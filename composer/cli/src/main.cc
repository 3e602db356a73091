#include <iostream>

#include "composer/cli/composerctl.h"

int main(int argc, char** argv) { return composer::cli::run(argc, argv, std::cout, std::cerr); }
