// The public NDK types carry ndkpi.h's numeric values; consumers porting NDK code rely on them.
#include "rocedp/ndk_types.hpp"

#include <gtest/gtest.h>

#include <type_traits>

namespace rocedp {
namespace {

TEST(NdkTypes, OperationTypeValues) {
  EXPECT_EQ(static_cast<uint32_t>(NdkOperationType::kReceive), 1u);
  EXPECT_EQ(static_cast<uint32_t>(NdkOperationType::kSend), 2u);
  EXPECT_EQ(static_cast<uint32_t>(NdkOperationType::kFastRegister), 4u);
  EXPECT_EQ(static_cast<uint32_t>(NdkOperationType::kBind), 8u);
  EXPECT_EQ(static_cast<uint32_t>(NdkOperationType::kInvalidate), 16u);
  EXPECT_EQ(static_cast<uint32_t>(NdkOperationType::kRead), 32u);
  EXPECT_EQ(static_cast<uint32_t>(NdkOperationType::kWrite), 64u);
  EXPECT_EQ(static_cast<uint32_t>(NdkOperationType::kReceiveAndInvalidate), 32769u);
}

TEST(NdkTypes, OpFlagValues) {
  EXPECT_EQ(NDK_OP_FLAG_SILENT_SUCCESS, 0x1u);
  EXPECT_EQ(NDK_OP_FLAG_READ_FENCE, 0x2u);
  EXPECT_EQ(NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT, 0x4u);
  EXPECT_EQ(NDK_OP_FLAG_ALLOW_REMOTE_READ, 0x8u);
  EXPECT_EQ(NDK_OP_FLAG_ALLOW_LOCAL_WRITE, 0x10u);
  EXPECT_EQ(NDK_OP_FLAG_ALLOW_REMOTE_WRITE, 0x30u);
  EXPECT_EQ(NDK_OP_FLAG_ALLOW_REMOTE_WRITE & NDK_OP_FLAG_ALLOW_LOCAL_WRITE,
            NDK_OP_FLAG_ALLOW_LOCAL_WRITE);
  EXPECT_EQ(NDK_OP_FLAG_INLINE, 0x40u);
  EXPECT_EQ(NDK_OP_FLAG_RDMA_READ_SINK, 0x80u);
  EXPECT_EQ(NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE, 0x100u);  // not 0x200 (DDI page typo)
  EXPECT_EQ(NDK_OP_FLAG_DEFER, 0x200u);
}

TEST(NdkTypes, MrFlagValues) {
  EXPECT_EQ(NDK_MR_FLAG_ALLOW_LOCAL_READ, 0u);
  EXPECT_EQ(NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 1u);
  EXPECT_EQ(NDK_MR_FLAG_ALLOW_REMOTE_READ, 2u);
  EXPECT_EQ(NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 5u);
  EXPECT_EQ(NDK_MR_FLAG_RDMA_READ_SINK, 8u);
}

TEST(NdkTypes, AdapterAndCqValues) {
  EXPECT_EQ(static_cast<uint32_t>(NdkRdmaTechnology::kRoceV2), 4u);
  EXPECT_EQ(NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED, 0x100u);
  EXPECT_EQ(NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED, 0x10000u);
  EXPECT_EQ(NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED, 0x2u);
  EXPECT_EQ(static_cast<uint32_t>(NdkCqNotifyType::kErrors), NDK_CQ_NOTIFY_ERRORS);
  EXPECT_EQ(static_cast<uint32_t>(NdkCqNotifyType::kAny), NDK_CQ_NOTIFY_ANY);
  EXPECT_EQ(static_cast<uint32_t>(NdkCqNotifyType::kSolicited), NDK_CQ_NOTIFY_SOLICITED);
  EXPECT_EQ(NDK_CQ_NOTIFY_ERRORS, 0u);
  EXPECT_EQ(NDK_CQ_NOTIFY_ANY, 1u);
  EXPECT_EQ(NDK_CQ_NOTIFY_SOLICITED, 2u);
  EXPECT_EQ(static_cast<uint32_t>(NdkObjectType::kAdapter), 1u);
  EXPECT_EQ(static_cast<uint32_t>(NdkObjectType::kSrq), 10u);
}

TEST(NdkTypes, ResultExKeepsResultFields) {
  int qp = 0, req = 0;
  NdkResultEx ex{
      STATUS_CANCELLED, 77, &qp, &req, NdkOperationType::kReceiveAndInvalidate, 0, 0x1234};
  const NdkResult r = to_result(ex);
  EXPECT_EQ(r.status, STATUS_CANCELLED);
  EXPECT_EQ(r.bytes_transferred, 77u);
  EXPECT_EQ(r.qp_context, &qp);
  EXPECT_EQ(r.request_context, &req);
  // 64-bit layout as ndkpi.h: NDK_RESULT is 24 bytes, NDK_RESULT_EX 40.
  EXPECT_EQ(sizeof(NdkResult), 24u);
  EXPECT_EQ(sizeof(NdkResultEx), 40u);
  EXPECT_EQ(sizeof(NdkSge), 16u);
  EXPECT_TRUE(std::is_trivially_copyable_v<NdkResultEx>);
}

}  // namespace
}  // namespace rocedp
