#!/usr/bin/env bash
# System libraries for the napari plugin tests (Debian 12, no display): Xvfb and Mesa's software
# OpenGL (Qt's offscreen platform gives napari no OpenGL context), and the libraries Qt 6's xcb
# platform plugin loads. tests/conftest.py starts a private Xvfb when napari tests are selected; where
# any of these is missing, those tests skip with the reason and the rest run. Safe to run twice; a
# no-op where the packages are already present; skipped (with a message) where apt-get is missing or
# we are not root.
set -euo pipefail

PACKAGES=(
    xvfb xauth
    libgl1 libegl1 libglx-mesa0 libgl1-mesa-dri
    libglib2.0-0 libdbus-1-3 libfontconfig1 fonts-dejavu-core
    libxkbcommon-x11-0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0
    libxcb-render-util0 libxcb-shape0 libxcb-xinerama0 libxcb-xkb1 libxcb-cursor0
)

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_system_deps: no apt-get here; install the equivalents of: ${PACKAGES[*]}" >&2
    exit 0
fi

missing=()
for package in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "install_system_deps: all ${#PACKAGES[@]} packages present"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install_system_deps: not root and no sudo; missing: ${missing[*]}" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install_system_deps: installed ${missing[*]}"
