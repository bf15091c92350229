// Seeds 003 (NdkCreateSharedEndpoint) and 004 (NdkCreateListener) with NdkListen: every address
// status, provoked on a live adapter.

#include "tests/seeds/cm_env.hpp"

namespace rocedp::test {
namespace {

constexpr uint32_t kForeignIp = 0xC6120063;  // 198.18.0.99: on the link, not ours

using SeedAddresses = CmFixture;

TEST_F(SeedAddresses, ListenStatuses) {
  Events ev;
  Listener* l1 = nullptr;
  Listener* l2 = nullptr;
  ASSERT_EQ(create_listener(*b_.adapter, &Events::cb, &ev, nullptr, nullptr, &l1), STATUS_SUCCESS);
  ASSERT_EQ(create_listener(*b_.adapter, &Events::cb, &ev, nullptr, nullptr, &l2), STATUS_SUCCESS);
  NdkSockAddr got;
  uint32_t size = sizeof(got);
  EXPECT_EQ(l1->get_local_address(&got, &size), STATUS_INVALID_DEVICE_STATE) << "not listening yet";

  EXPECT_EQ(l1->listen(NdkSockAddr{kForeignIp, 5000}, nullptr, nullptr), STATUS_INVALID_ADDRESS);
  ASSERT_EQ(l1->listen(addr_b(5000), nullptr, nullptr), STATUS_SUCCESS);
  EXPECT_EQ(l1->listen(addr_b(5001), nullptr, nullptr), STATUS_INVALID_DEVICE_STATE)
      << "already listening";
  EXPECT_EQ(l2->listen(addr_b(5000), nullptr, nullptr), STATUS_SHARING_VIOLATION);
  EXPECT_EQ(l2->listen(NdkSockAddr{0, 5000}, nullptr, nullptr), STATUS_SHARING_VIOLATION)
      << "wildcard overlaps";
  SharedEndpoint* sep = nullptr;
  EXPECT_EQ(create_shared_endpoint(*b_.adapter, addr_b(5000), nullptr, nullptr, &sep),
            STATUS_SHARING_VIOLATION);

  // Port 0: an ephemeral port, reported by GetLocalAddress; BUFFER_TOO_SMALL reports the size.
  ASSERT_EQ(l2->listen(addr_b(0), nullptr, nullptr), STATUS_SUCCESS);
  size = 3;
  EXPECT_EQ(l2->get_local_address(&got, &size), STATUS_BUFFER_TOO_SMALL);
  EXPECT_EQ(size, sizeof(NdkSockAddr));
  ASSERT_EQ(l2->get_local_address(&got, &size), STATUS_SUCCESS);
  EXPECT_EQ(got.ip, b_.ip);
  EXPECT_GE(got.port, 49152);

  // Close frees the port for the next listener.
  close_listener(l1);
  ASSERT_EQ(create_listener(*b_.adapter, &Events::cb, &ev, nullptr, nullptr, &l1), STATUS_SUCCESS);
  EXPECT_EQ(l1->listen(addr_b(5000), nullptr, nullptr), STATUS_SUCCESS);
  close_listener(l1);
  close_listener(l2);
}

// The connection objects answer NdkQueryExtensionInterface as every object does: rocedp has no
// extension interface.
TEST_F(SeedAddresses, QueryExtensionInterfaceIsNotSupportedOnConnectionObjects) {
  Events ev;
  Listener* l = nullptr;
  Connector* c = nullptr;
  SharedEndpoint* sep = nullptr;
  ASSERT_EQ(create_listener(*b_.adapter, &Events::cb, &ev, nullptr, nullptr, &l), STATUS_SUCCESS);
  ASSERT_EQ(create_connector(*b_.adapter, nullptr, nullptr, &c), STATUS_SUCCESS);
  ASSERT_EQ(create_shared_endpoint(*b_.adapter, addr_b(5100), nullptr, nullptr, &sep),
            STATUS_SUCCESS);
  const NdkGuid some{1, 2, 3, {4, 5, 6, 7, 8, 9, 10, 11}};
  for (const NdkObjectBase* o :
       {static_cast<const NdkObjectBase*>(l), static_cast<const NdkObjectBase*>(c),
        static_cast<const NdkObjectBase*>(sep)}) {
    NdkExtensionInterface ext{&some};
    EXPECT_EQ(o->query_extension_interface(&some, NdkVersion{2, 1}, &ext), STATUS_NOT_SUPPORTED);
    EXPECT_EQ(ext.dispatch, nullptr);
    EXPECT_EQ(o->query_extension_interface(&some, NdkVersion{2, 1}, nullptr),
              STATUS_INVALID_PARAMETER);
  }
  close_connector(c);
  close_listener(l);
  EXPECT_EQ(sep->close(nullptr, nullptr), STATUS_SUCCESS);
}

TEST_F(SeedAddresses, CreateListenerInsufficientResourcesAtTheConfiguredLimit) {
  Events ev;
  std::vector<Listener*> ls(4, nullptr);
  for (auto& l : ls)
    ASSERT_EQ(create_listener(*a_.adapter, &Events::cb, &ev, nullptr, nullptr, &l), STATUS_SUCCESS);
  Listener* extra = nullptr;
  EXPECT_EQ(create_listener(*a_.adapter, &Events::cb, &ev, nullptr, nullptr, &extra),
            STATUS_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(extra, nullptr);
  close_listener(ls[0]);
  EXPECT_EQ(create_listener(*a_.adapter, &Events::cb, &ev, nullptr, nullptr, &extra),
            STATUS_SUCCESS);
  close_listener(extra);
  for (auto& l : ls) close_listener(l);
}

TEST_F(SeedAddresses, SharedEndpointStatuses) {
  SharedEndpoint* s1 = nullptr;
  SharedEndpoint* s2 = nullptr;
  EXPECT_EQ(
      create_shared_endpoint(*a_.adapter, NdkSockAddr{kForeignIp, 6000}, nullptr, nullptr, &s1),
      STATUS_INVALID_ADDRESS);
  EXPECT_EQ(create_shared_endpoint(*a_.adapter, NdkSockAddr{0, 6000}, nullptr, nullptr, &s1),
            STATUS_INVALID_ADDRESS);
  ASSERT_EQ(create_shared_endpoint(*a_.adapter, addr_a(6000), nullptr, nullptr, &s1),
            STATUS_SUCCESS);
  EXPECT_EQ(create_shared_endpoint(*a_.adapter, addr_a(6000), nullptr, nullptr, &s2),
            STATUS_SHARING_VIOLATION);
  Events ev;
  Listener* l = nullptr;
  ASSERT_EQ(create_listener(*a_.adapter, &Events::cb, &ev, nullptr, nullptr, &l), STATUS_SUCCESS);
  EXPECT_EQ(l->listen(addr_a(6000), nullptr, nullptr), STATUS_SHARING_VIOLATION);
  close_listener(l);
  NdkSockAddr got;
  uint32_t size = 0;
  EXPECT_EQ(s1->get_local_address(nullptr, &size), STATUS_BUFFER_TOO_SMALL);
  EXPECT_EQ(size, sizeof(NdkSockAddr));
  ASSERT_EQ(s1->get_local_address(&got, &size), STATUS_SUCCESS);
  EXPECT_EQ(got, addr_a(6000));
  EXPECT_EQ(s1->close(nullptr, nullptr), STATUS_SUCCESS);
  EXPECT_EQ(create_shared_endpoint(*a_.adapter, addr_a(6000), nullptr, nullptr, &s2),
            STATUS_SUCCESS)
      << "close released the port";
  EXPECT_EQ(s2->close(nullptr, nullptr), STATUS_SUCCESS);
}

TEST_F(SeedAddresses, CreateSharedEndpointInsufficientResourcesAtTheConfiguredLimit) {
  std::vector<SharedEndpoint*> v(4, nullptr);
  for (auto& s : v)
    ASSERT_EQ(create_shared_endpoint(*a_.adapter, addr_a(0), nullptr, nullptr, &s), STATUS_SUCCESS);
  SharedEndpoint* extra = nullptr;
  EXPECT_EQ(create_shared_endpoint(*a_.adapter, addr_a(0), nullptr, nullptr, &extra),
            STATUS_INSUFFICIENT_RESOURCES);
  for (auto& s : v) EXPECT_EQ(s->close(nullptr, nullptr), STATUS_SUCCESS);
}

// All 16,384 ephemeral ports really taken, one shared endpoint each.
class SeedEphemeral : public CmFixture {
 protected:
  config::LimitsConfig adapter_limits() const override {
    config::LimitsConfig l = limits();
    l.max_shared_endpoints = 20000;
    return l;
  }
};

// The port a shared endpoint holds, through NdkGetSharedEndpointAddress.
uint16_t port_of(const SharedEndpoint* s) {
  NdkSockAddr a;
  uint32_t size = sizeof a;
  EXPECT_EQ(s->get_local_address(&a, &size), STATUS_SUCCESS);
  return a.port;
}

TEST_F(SeedEphemeral, TooManyAddressesAfterExhaustingAllEphemeralPorts) {
  std::vector<SharedEndpoint*> v;
  std::vector<bool> seen(65536, false);
  for (int i = 0; i < 16384; ++i) {
    SharedEndpoint* s = nullptr;
    ASSERT_EQ(create_shared_endpoint(*a_.adapter, addr_a(0), nullptr, nullptr, &s), STATUS_SUCCESS)
        << i;
    const uint16_t port = port_of(s);
    ASSERT_GE(port, 49152);
    ASSERT_FALSE(seen[port]) << "port handed out twice";
    seen[port] = true;
    v.push_back(s);
  }
  SharedEndpoint* extra = nullptr;
  EXPECT_EQ(create_shared_endpoint(*a_.adapter, addr_a(0), nullptr, nullptr, &extra),
            STATUS_TOO_MANY_ADDRESSES);
  // The same exhaustion for Listen and Connect with port 0.
  Events ev;
  Listener* l = nullptr;
  ASSERT_EQ(create_listener(*a_.adapter, &Events::cb, &ev, nullptr, nullptr, &l), STATUS_SUCCESS);
  EXPECT_EQ(l->listen(addr_a(0), nullptr, nullptr), STATUS_TOO_MANY_ADDRESSES);
  EXPECT_EQ(l->listen(addr_a(4000), nullptr, nullptr), STATUS_SUCCESS)
      << "a fixed port still works";
  Endpoint x, y;
  make_endpoints(x, y);
  Connector* c = connector(a_);
  Req r;
  EXPECT_EQ(c->connect(x.qp, addr_a(0), addr_b(7000), 1, 1, nullptr, 0, &Req::cb, &r),
            STATUS_TOO_MANY_ADDRESSES);
  // One port back: port 0 works again and gets exactly that port.
  const uint16_t freed = port_of(v.back());
  EXPECT_EQ(v.back()->close(nullptr, nullptr), STATUS_SUCCESS);
  v.pop_back();
  ASSERT_EQ(create_shared_endpoint(*a_.adapter, addr_a(0), nullptr, nullptr, &extra),
            STATUS_SUCCESS);
  EXPECT_EQ(port_of(extra), freed);
  v.push_back(extra);
  pump(4);
  EXPECT_FALSE(r.done()) << "an inline failure has no callback";
  close_connector(c);
  close_listener(l);
  for (auto* s : v) ASSERT_EQ(s->close(nullptr, nullptr), STATUS_SUCCESS);
  close_endpoint(x);
  close_endpoint(y);
}

}  // namespace
}  // namespace rocedp::test
