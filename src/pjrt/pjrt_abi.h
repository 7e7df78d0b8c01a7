/* tpuc's own declaration of the subset of the PJRT C API it drives.
 *
 * Written from the published API (openxla/xla xla/pjrt/c/pjrt_c_api.h and
 * its CHANGELOG). Rules of the ABI that this file relies on:
 *  - every argument struct starts with `size_t struct_size` and
 *    `PJRT_Extension_Base* extension_start`; the caller sets struct_size to
 *    the size of the struct it knows, and newer versions only append fields;
 *  - the PJRT_Api function table only grows at its end, so a function exists
 *    in a loaded plugin when its slot lies inside the plugin's
 *    PJRT_Api.struct_size and is non-NULL (see TPUC_PJRT_HAS).
 * Slots tpuc does not call are declared as plain `void*` placeholders so that
 * the offsets of the ones it does call stay right. */
#ifndef TPUC_SRC_PJRT_PJRT_ABI_H_
#define TPUC_SRC_PJRT_PJRT_ABI_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct PJRT_Extension_Base PJRT_Extension_Base;
struct PJRT_Extension_Base {
  size_t struct_size;
  int type;
  PJRT_Extension_Base* next;
};

typedef struct PJRT_Error PJRT_Error;
typedef struct PJRT_Event PJRT_Event;
typedef struct PJRT_Client PJRT_Client;
typedef struct PJRT_Device PJRT_Device;
typedef struct PJRT_DeviceDescription PJRT_DeviceDescription;
typedef struct PJRT_Memory PJRT_Memory;
typedef struct PJRT_Executable PJRT_Executable;
typedef struct PJRT_LoadedExecutable PJRT_LoadedExecutable;
typedef struct PJRT_Buffer PJRT_Buffer;
typedef struct PJRT_SerializedExecutable PJRT_SerializedExecutable;
typedef struct PJRT_AsyncHostToDeviceTransferManager
    PJRT_AsyncHostToDeviceTransferManager;

/* Header shared by every argument struct. */
#define PJRT_ARGS_HEADER \
  size_t struct_size;    \
  PJRT_Extension_Base* extension_start

/* ------------------------------- errors -------------------------------- */

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Error* error;
} PJRT_Error_Destroy_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  const PJRT_Error* error;
  const char* message; /* out */
  size_t message_size; /* out */
} PJRT_Error_Message_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  const PJRT_Error* error;
  int code; /* out: canonical status code */
} PJRT_Error_GetCode_Args;

/* ---------------------------- named values ----------------------------- */

typedef enum {
  PJRT_NamedValue_kString = 0,
  PJRT_NamedValue_kInt64 = 1,
  PJRT_NamedValue_kInt64List = 2,
  PJRT_NamedValue_kFloat = 3,
  PJRT_NamedValue_kBool = 4,
} PJRT_NamedValue_Type;

typedef struct {
  PJRT_ARGS_HEADER;
  const char* name;
  size_t name_size;
  PJRT_NamedValue_Type type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size; /* elements for strings/lists, 1 for scalars */
} PJRT_NamedValue;

/* ------------------------------- plugin -------------------------------- */

typedef struct {
  PJRT_ARGS_HEADER;
} PJRT_Plugin_Initialize_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  const PJRT_NamedValue* attributes; /* out, process lifetime */
  size_t num_attributes;             /* out */
} PJRT_Plugin_Attributes_Args;

/* ------------------------------- events -------------------------------- */

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Event* event;
} PJRT_Event_Destroy_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Event* event;
  bool is_ready; /* out */
} PJRT_Event_IsReady_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Event* event;
} PJRT_Event_Error_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Event* event;
} PJRT_Event_Await_Args;

typedef void (*PJRT_Event_OnReadyCallback)(PJRT_Error* error, void* user_arg);

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Event* event;
  PJRT_Event_OnReadyCallback callback;
  void* user_arg;
} PJRT_Event_OnReady_Args;

/* ------------------------------- client -------------------------------- */

typedef struct {
  PJRT_ARGS_HEADER;
  const PJRT_NamedValue* create_options;
  size_t num_options;
  void* kv_get_callback; /* distributed key-value store: unused */
  void* kv_get_user_arg;
  void* kv_put_callback;
  void* kv_put_user_arg;
  PJRT_Client* client; /* out */
  void* kv_try_get_callback;
  void* kv_try_get_user_arg;
} PJRT_Client_Create_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Client* client;
} PJRT_Client_Destroy_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Client* client;
  const char* platform_name; /* out */
  size_t platform_name_size; /* out */
} PJRT_Client_PlatformName_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Client* client;
  const char* platform_version; /* out */
  size_t platform_version_size; /* out */
} PJRT_Client_PlatformVersion_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Client* client;
  PJRT_Device* const* addressable_devices; /* out */
  size_t num_addressable_devices;          /* out */
} PJRT_Client_AddressableDevices_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  char* code;
  size_t code_size;
  const char* format; /* "mlir" or "hlo" */
  size_t format_size;
} PJRT_Program;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Client* client;
  const PJRT_Program* program;
  const char* compile_options; /* serialized xla.CompileOptionsProto */
  size_t compile_options_size;
  PJRT_LoadedExecutable* executable; /* out */
} PJRT_Client_Compile_Args;

/* Element types; the numbering is the ABI's. */
typedef enum {
  PJRT_Buffer_Type_INVALID = 0,
  PJRT_Buffer_Type_PRED = 1,
  PJRT_Buffer_Type_S8 = 2,
  PJRT_Buffer_Type_S16 = 3,
  PJRT_Buffer_Type_S32 = 4,
  PJRT_Buffer_Type_S64 = 5,
  PJRT_Buffer_Type_U8 = 6,
  PJRT_Buffer_Type_U16 = 7,
  PJRT_Buffer_Type_U32 = 8,
  PJRT_Buffer_Type_U64 = 9,
  PJRT_Buffer_Type_F16 = 10,
  PJRT_Buffer_Type_F32 = 11,
  PJRT_Buffer_Type_F64 = 12,
  PJRT_Buffer_Type_BF16 = 13,
  PJRT_Buffer_Type_C64 = 14,
  PJRT_Buffer_Type_C128 = 15,
  PJRT_Buffer_Type_F8E5M2 = 16,
  PJRT_Buffer_Type_F8E4M3FN = 17,
  PJRT_Buffer_Type_F8E4M3B11FNUZ = 18,
  PJRT_Buffer_Type_F8E5M2FNUZ = 19,
  PJRT_Buffer_Type_F8E4M3FNUZ = 20,
} PJRT_Buffer_Type;

typedef enum {
  PJRT_HostBufferSemantics_kImmutableOnlyDuringCall = 0,
  PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes = 1,
  PJRT_HostBufferSemantics_kImmutableZeroCopy = 2,
  PJRT_HostBufferSemantics_kMutableZeroCopy = 3,
} PJRT_HostBufferSemantics;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Client* client;
  const void* data;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  const int64_t* byte_strides; /* NULL: dense row-major */
  size_t num_byte_strides;
  PJRT_HostBufferSemantics host_buffer_semantics;
  PJRT_Device* device;
  PJRT_Memory* memory;               /* NULL: the device's default memory */
  void* device_layout;               /* NULL: default layout */
  PJRT_Event* done_with_host_buffer; /* out */
  PJRT_Buffer* buffer;               /* out */
} PJRT_Client_BufferFromHostBuffer_Args;

/* ------------------------------- devices ------------------------------- */

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_DeviceDescription* device_description;
  int id; /* out */
} PJRT_DeviceDescription_Id_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_DeviceDescription* device_description;
  const char* device_kind; /* out */
  size_t device_kind_size; /* out */
} PJRT_DeviceDescription_Kind_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_DeviceDescription* device_description;
  const char* to_string; /* out */
  size_t to_string_size; /* out */
} PJRT_DeviceDescription_ToString_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Device* device;
  PJRT_DeviceDescription* device_description; /* out */
} PJRT_Device_GetDescription_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Device* device;
  int local_hardware_id; /* out */
} PJRT_Device_LocalHardwareId_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Device* device;
  int64_t bytes_in_use; /* out */
  int64_t peak_bytes_in_use;
  bool peak_bytes_in_use_is_set;
  int64_t num_allocs;
  bool num_allocs_is_set;
  int64_t largest_alloc_size;
  bool largest_alloc_size_is_set;
  int64_t bytes_limit;
  bool bytes_limit_is_set;
  int64_t bytes_reserved;
  bool bytes_reserved_is_set;
  int64_t peak_bytes_reserved;
  bool peak_bytes_reserved_is_set;
  int64_t bytes_reservable_limit;
  bool bytes_reservable_limit_is_set;
  int64_t largest_free_block_bytes;
  bool largest_free_block_bytes_is_set;
  int64_t pool_bytes;
  bool pool_bytes_is_set;
  int64_t peak_pool_bytes;
  bool peak_pool_bytes_is_set;
} PJRT_Device_MemoryStats_Args;

/* ----------------------------- executables ----------------------------- */

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Executable* executable;
} PJRT_Executable_Destroy_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_LoadedExecutable* executable;
} PJRT_LoadedExecutable_Destroy_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_LoadedExecutable* loaded_executable;
  PJRT_Executable* executable; /* out, caller destroys */
} PJRT_LoadedExecutable_GetExecutable_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Executable* executable;
  size_t num_outputs; /* out */
} PJRT_Executable_NumOutputs_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  const PJRT_Executable* executable;
  const char* serialized_bytes;                     /* out */
  size_t serialized_bytes_size;                     /* out */
  PJRT_SerializedExecutable* serialized_executable; /* out, backs bytes */
  void (*serialized_executable_deleter)(PJRT_SerializedExecutable* exec);
} PJRT_Executable_Serialize_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Client* client;
  const char* serialized_executable;
  size_t serialized_executable_size;
  PJRT_LoadedExecutable* loaded_executable;          /* out */
  const char* overridden_serialized_compile_options; /* API >= 0.71 */
  size_t overridden_serialized_compile_options_size;
} PJRT_Executable_DeserializeAndLoad_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  void** send_callbacks; /* host callbacks: unused */
  void** recv_callbacks;
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  const int64_t* non_donatable_input_indices; /* API >= 0.39 */
  size_t num_non_donatable_input_indices;
  void* context;             /* API >= 0.64 */
  const char* call_location; /* API >= 0.76 */
  size_t num_tasks;          /* API >= 0.78 */
  int* task_ids;
  int64_t* incarnation_ids;
  const void* multi_slice_config; /* API >= 0.97 */
} PJRT_ExecuteOptions;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_LoadedExecutable* executable;
  PJRT_ExecuteOptions* options;
  PJRT_Buffer* const* const* argument_lists; /* [num_devices][num_args] */
  size_t num_devices;
  size_t num_args;
  PJRT_Buffer** const* output_lists;   /* [num_devices][num_outputs] out */
  PJRT_Event** device_complete_events; /* [num_devices] out, optional */
  PJRT_Device* execute_device;         /* portable executables: where to run */
} PJRT_LoadedExecutable_Execute_Args;

/* ------------------------------- buffers ------------------------------- */

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
} PJRT_Buffer_Destroy_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  bool is_deleted; /* out */
} PJRT_Buffer_IsDeleted_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Buffer* src;
  void* host_layout; /* NULL: dense row-major */
  void* dst;         /* NULL: query dst_size only */
  size_t dst_size;   /* in/out */
  PJRT_Event* event; /* out */
} PJRT_Buffer_ToHostBuffer_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  PJRT_Event* event; /* out */
} PJRT_Buffer_ReadyEvent_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Device* device;
  PJRT_Memory* memory; /* out */
} PJRT_Device_DefaultMemory_Args;

/* ------------------- asynchronous host-to-device transfers ------------------
 */

typedef struct {
  PJRT_ARGS_HEADER;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Buffer_Type element_type;
} PJRT_ShapeSpec;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Client* client;
  PJRT_ShapeSpec* shape_specs;
  size_t num_shape_specs;
  void** device_layouts; /* optional */
  size_t num_device_layouts;
  PJRT_Memory* memory;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager; /* out */
} PJRT_Client_CreateBuffersForAsyncHostToDevice_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
} PJRT_AsyncHostToDeviceTransferManager_Destroy_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  PJRT_Buffer* buffer_out; /* out */
} PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  int error_code;
  const char* error_message;
  size_t error_message_size;
} PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  const void* data;
  int64_t offset;
  int64_t transfer_size;
  bool is_last_transfer;
  PJRT_Event* done_with_h2d_transfer; /* out */
} PJRT_AsyncHostToDeviceTransferManager_TransferData_Args;

/* ------------------- multi-device execution and copies ------------------ */

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_LoadedExecutable* executable;
  PJRT_Device* const* addressable_devices; /* out */
  size_t num_addressable_devices;          /* out */
} PJRT_LoadedExecutable_AddressableDevices_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  PJRT_Device* dst_device;
  PJRT_Buffer* dst_buffer; /* out */
} PJRT_Buffer_CopyToDevice_Args;

typedef struct {
  PJRT_ARGS_HEADER;
  PJRT_Buffer* buffer;
  uintptr_t buffer_pointer; /* out */
} PJRT_Buffer_UnsafePointer_Args;

/* ---------------------------- function table --------------------------- */

#define PJRT_FN(name) PJRT_Error* (*name)(name##_Args * args)

typedef struct {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  int major_version;
  int minor_version;
} PJRT_Api_Version;

typedef struct PJRT_Api {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Api_Version pjrt_api_version;

  void (*PJRT_Error_Destroy)(PJRT_Error_Destroy_Args* args);
  void (*PJRT_Error_Message)(PJRT_Error_Message_Args* args);
  PJRT_FN(PJRT_Error_GetCode);

  PJRT_FN(PJRT_Plugin_Initialize);
  PJRT_FN(PJRT_Plugin_Attributes);

  PJRT_FN(PJRT_Event_Destroy);
  PJRT_FN(PJRT_Event_IsReady);
  PJRT_FN(PJRT_Event_Error);
  PJRT_FN(PJRT_Event_Await);
  PJRT_FN(PJRT_Event_OnReady);

  PJRT_FN(PJRT_Client_Create);
  PJRT_FN(PJRT_Client_Destroy);
  PJRT_FN(PJRT_Client_PlatformName);
  void* PJRT_Client_ProcessIndex;
  PJRT_FN(PJRT_Client_PlatformVersion);
  void* PJRT_Client_Devices;
  PJRT_FN(PJRT_Client_AddressableDevices);
  void* PJRT_Client_LookupDevice;
  void* PJRT_Client_LookupAddressableDevice;
  void* PJRT_Client_AddressableMemories;
  PJRT_FN(PJRT_Client_Compile);
  void* PJRT_Client_DefaultDeviceAssignment;
  PJRT_FN(PJRT_Client_BufferFromHostBuffer);

  PJRT_FN(PJRT_DeviceDescription_Id);
  void* PJRT_DeviceDescription_ProcessIndex;
  void* PJRT_DeviceDescription_Attributes;
  PJRT_FN(PJRT_DeviceDescription_Kind);
  void* PJRT_DeviceDescription_DebugString;
  PJRT_FN(PJRT_DeviceDescription_ToString);

  PJRT_FN(PJRT_Device_GetDescription);
  void* PJRT_Device_IsAddressable;
  PJRT_FN(PJRT_Device_LocalHardwareId);
  void* PJRT_Device_AddressableMemories;
  PJRT_FN(PJRT_Device_DefaultMemory);
  PJRT_FN(PJRT_Device_MemoryStats);

  void* PJRT_Memory_Id;
  void* PJRT_Memory_Kind;
  void* PJRT_Memory_DebugString;
  void* PJRT_Memory_ToString;
  void* PJRT_Memory_AddressableByDevices;

  PJRT_FN(PJRT_Executable_Destroy);
  void* PJRT_Executable_Name;
  void* PJRT_Executable_NumReplicas;
  void* PJRT_Executable_NumPartitions;
  PJRT_FN(PJRT_Executable_NumOutputs);
  void* PJRT_Executable_SizeOfGeneratedCodeInBytes;
  void* PJRT_Executable_GetCostAnalysis;
  void* PJRT_Executable_OutputMemoryKinds;
  void* PJRT_Executable_OptimizedProgram;
  PJRT_FN(PJRT_Executable_Serialize);

  PJRT_FN(PJRT_LoadedExecutable_Destroy);
  PJRT_FN(PJRT_LoadedExecutable_GetExecutable);
  PJRT_FN(PJRT_LoadedExecutable_AddressableDevices);
  void* PJRT_LoadedExecutable_Delete;
  void* PJRT_LoadedExecutable_IsDeleted;
  PJRT_FN(PJRT_LoadedExecutable_Execute);
  PJRT_FN(PJRT_Executable_DeserializeAndLoad);
  void* PJRT_LoadedExecutable_Fingerprint;

  PJRT_FN(PJRT_Buffer_Destroy);
  void* PJRT_Buffer_ElementType;
  void* PJRT_Buffer_Dimensions;
  void* PJRT_Buffer_UnpaddedDimensions;
  void* PJRT_Buffer_DynamicDimensionIndices;
  void* PJRT_Buffer_GetMemoryLayout;
  void* PJRT_Buffer_OnDeviceSizeInBytes;
  void* PJRT_Buffer_Device;
  void* PJRT_Buffer_Memory;
  void* PJRT_Buffer_Delete;
  PJRT_FN(PJRT_Buffer_IsDeleted);
  PJRT_FN(PJRT_Buffer_CopyToDevice);
  PJRT_FN(PJRT_Buffer_ToHostBuffer);
  void* PJRT_Buffer_IsOnCpu;
  PJRT_FN(PJRT_Buffer_ReadyEvent);
  PJRT_FN(PJRT_Buffer_UnsafePointer);
  void* PJRT_Buffer_IncreaseExternalReferenceCount;
  void* PJRT_Buffer_DecreaseExternalReferenceCount;
  void* PJRT_Buffer_OpaqueDeviceMemoryDataPointer;

  void* PJRT_CopyToDeviceStream_Destroy;
  void* PJRT_CopyToDeviceStream_AddChunk;
  void* PJRT_CopyToDeviceStream_TotalBytes;
  void* PJRT_CopyToDeviceStream_GranuleSize;
  void* PJRT_CopyToDeviceStream_CurrentBytes;

  void* PJRT_TopologyDescription_Create;
  void* PJRT_TopologyDescription_Destroy;
  void* PJRT_TopologyDescription_PlatformName;
  void* PJRT_TopologyDescription_PlatformVersion;
  void* PJRT_TopologyDescription_GetDeviceDescriptions;
  void* PJRT_TopologyDescription_Serialize;
  void* PJRT_TopologyDescription_Attributes;

  void* PJRT_Compile;

  /* Appended after the 0.x reordering, in API order. */
  void* PJRT_Executable_OutputElementTypes;
  void* PJRT_Executable_OutputDimensions;
  void* PJRT_Buffer_CopyToMemory;
  void* PJRT_Client_CreateViewOfDeviceBuffer;
  void* PJRT_Executable_Fingerprint;
  void* PJRT_Client_TopologyDescription;
  void* PJRT_Executable_GetCompiledMemoryStats;
  void* PJRT_Memory_Kind_Id;
  void* PJRT_ExecuteContext_Create;
  void* PJRT_ExecuteContext_Destroy;
  void* PJRT_Buffer_CopyRawToHost;
  PJRT_FN(PJRT_AsyncHostToDeviceTransferManager_Destroy);
  PJRT_FN(PJRT_AsyncHostToDeviceTransferManager_TransferData);
  PJRT_FN(PJRT_Client_CreateBuffersForAsyncHostToDevice);
  PJRT_FN(PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer);
  void* PJRT_AsyncHostToDeviceTransferManager_Device;
  void* PJRT_AsyncHostToDeviceTransferManager_BufferCount;
  void* PJRT_AsyncHostToDeviceTransferManager_BufferSize;
  PJRT_FN(PJRT_AsyncHostToDeviceTransferManager_SetBufferError);
  /* Later slots are not used by tpuc. */
} PJRT_Api;

#undef PJRT_FN

/* True when the loaded table has the slot `fn` and it is set. */
#define TPUC_PJRT_HAS(api, fn)                                     \
  ((api)->struct_size >= offsetof(PJRT_Api, fn) + sizeof(void*) && \
   (api)->fn != NULL)

#endif /* TPUC_SRC_PJRT_PJRT_ABI_H_ */
