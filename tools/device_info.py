"""Lists the OpenCL devices the driver sees, in gpu_index order, as the driver describes them."""
import json

from aethercl import Library


def main() -> None:
    lib = Library()
    count = lib.aethercl_device_count()
    if count == 0:
        print("no OpenCL device found: " + (lib.last_error() or "no platform is registered"))
        return
    for index in range(count):
        info = json.loads(lib.json_call("aethercl_device_info", index))
        print(f"{index}: {info['name']} [{info['type']}] on {info['platform']} - "
              f"{info['compute_units']} CUs, {info['global_mem_bytes'] / 2**30:.1f} GiB, "
              f"fp64={'yes' if info['fp64'] else 'no'}")


if __name__ == "__main__":
    main()
